#include "platform/deployments/llm_series.h"

#include <cstdlib>
#include <optional>
#include <sstream>

namespace zenith::platform {

namespace {

// The value of the first sample of `name` (with or without labels) in a Prometheus text.
std::optional<double> value_of(const std::string& metrics, const std::string& name) {
  std::istringstream lines(metrics);
  for (std::string l; std::getline(lines, l);) {
    if (l.rfind(name, 0) != 0 || l.size() <= name.size()) continue;
    const char next = l[name.size()];
    if (next != '{' && next != ' ') continue;
    const auto space = l.rfind(' ');
    if (space == std::string::npos) continue;
    return std::strtod(l.c_str() + space + 1, nullptr);
  }
  return std::nullopt;
}

// Mean of a histogram's new observations in milliseconds, or -1 when there were none.
double interval_mean_ms(double sum, double count, double last_sum, double last_count) {
  return count > last_count ? 1e3 * (sum - last_sum) / (count - last_count) : -1;
}

}  // namespace

bool LlmSeries::add(double now, const std::string& metrics) {
  const auto running = value_of(metrics, "zenith:num_requests_running");
  if (!running) return false;  // not an LLM service
  auto get = [&](const char* name) { return value_of(metrics, name).value_or(0); };
  Counters c;
  c.time = now;
  c.ttft_sum = get("zenith:time_to_first_token_seconds_sum");
  c.ttft_count = get("zenith:time_to_first_token_seconds_count");
  c.itl_sum = get("zenith:inter_token_latency_seconds_sum");
  c.itl_count = get("zenith:inter_token_latency_seconds_count");
  c.tokens = get("zenith:generation_tokens_total");
  Sample s;
  s.time = now;
  s.running = *running;
  s.waiting = get("zenith:num_requests_waiting");
  s.kv_cache_usage = get("zenith:kv_cache_usage_perc");
  const bool restarted = have_last_ && (c.ttft_count < last_.ttft_count ||
                                        c.itl_count < last_.itl_count || c.tokens < last_.tokens);
  if (have_last_ && !restarted && now > last_.time) {
    s.ttft_ms = interval_mean_ms(c.ttft_sum, c.ttft_count, last_.ttft_sum, last_.ttft_count);
    s.itl_ms = interval_mean_ms(c.itl_sum, c.itl_count, last_.itl_sum, last_.itl_count);
    s.tokens_per_s = (c.tokens - last_.tokens) / (now - last_.time);
  }
  last_ = c;
  have_last_ = true;
  samples_.push_back(s);
  while (samples_.size() > kMaxSamples) samples_.pop_front();
  return true;
}

nlohmann::json LlmSeries::to_json() const {
  using nlohmann::json;
  json time = json::array(), ttft = json::array(), itl = json::array(), tps = json::array(),
       running = json::array(), waiting = json::array(), kv = json::array();
  auto or_null = [](double v) { return v < 0 ? json(nullptr) : json(v); };
  for (const auto& s : samples_) {
    time.push_back(s.time);
    ttft.push_back(or_null(s.ttft_ms));
    itl.push_back(or_null(s.itl_ms));
    tps.push_back(or_null(s.tokens_per_s));
    running.push_back(s.running);
    waiting.push_back(s.waiting);
    kv.push_back(s.kv_cache_usage);
  }
  return {{"time", time},       {"ttft_ms", ttft},    {"itl_ms", itl},       {"tokens_per_s", tps},
          {"running", running}, {"waiting", waiting}, {"kv_cache_usage", kv}};
}

}  // namespace zenith::platform
