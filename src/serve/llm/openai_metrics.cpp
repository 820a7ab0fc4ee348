#include "serve/llm/openai_metrics.h"

#include <cstdio>

namespace zenith::serve::llm {

namespace {

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

void header(std::string& out, const std::string& name, const char* type, const char* help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void sample(std::string& out, const std::string& name, const std::string& labels, double value) {
  out += name + "{" + labels + "} " + number(value) + "\n";
}

// Prometheus buckets are cumulative; the engine's are not (the last counts those above all).
void histogram(std::string& out, const std::string& name, const char* help,
               const std::string& labels, const Histogram& h) {
  header(out, name, "histogram", help);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < h.bounds.size(); ++i) {
    cumulative += i < h.counts.size() ? h.counts[i] : 0;
    out += name + "_bucket{" + labels + ",le=\"" + number(h.bounds[i]) + "\"} " +
           std::to_string(cumulative) + "\n";
  }
  out += name + "_bucket{" + labels + ",le=\"+Inf\"} " + std::to_string(h.count) + "\n";
  out += name + "_sum{" + labels + "} " + number(h.sum) + "\n";
  out += name + "_count{" + labels + "} " + std::to_string(h.count) + "\n";
}

}  // namespace

std::string metrics_text(const std::string& model, const EngineStats& s, const HttpCounts& http) {
  const std::string m = "model_name=\"" + model + "\"";
  std::string out;
  auto gauge = [&](const std::string& name, const char* help, double v) {
    header(out, "zenith:" + name, "gauge", help);
    sample(out, "zenith:" + name, m, v);
  };
  auto counter = [&](const std::string& name, const char* help, double v) {
    header(out, "zenith:" + name, "counter", help);
    sample(out, "zenith:" + name, m, v);
  };
  gauge("num_requests_running", "Requests in the engine's running batch.", double(s.running));
  gauge("num_requests_waiting", "Requests waiting to be scheduled.", double(s.waiting));
  gauge("kv_cache_usage_perc", "KV cache usage: used blocks / all blocks (1 = full).",
        s.kv_cache_usage);
  counter("prompt_tokens_total", "Prompt tokens processed (prefilled).", double(s.prompt_tokens));
  counter("generation_tokens_total", "Tokens generated.", double(s.generation_tokens));
  counter("num_preemptions_total", "Requests preempted (to be recomputed).", double(s.preemptions));
  counter("prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.",
          double(s.prefix_cache_queries));
  counter("prefix_cache_hits_total", "Prompt tokens found in the prefix cache.",
          double(s.prefix_cache_hits));
  header(out, "zenith:request_success_total", "counter", "Requests finished, by finish reason.");
  auto finished = s.finished;
  for (const char* reason : {"stop", "length", "abort"}) {
    sample(out, "zenith:request_success_total", m + ",finished_reason=\"" + reason + "\"",
           double(finished[reason]));
    finished.erase(reason);
  }
  for (const auto& [reason, n] : finished)  // "error"
    sample(out, "zenith:request_success_total", m + ",finished_reason=\"" + reason + "\"",
           double(n));
  histogram(out, "zenith:time_to_first_token_seconds", "Time to first token.", m,
            s.time_to_first_token);
  histogram(out, "zenith:inter_token_latency_seconds", "Time between generated tokens.", m,
            s.inter_token_latency);
  histogram(out, "zenith:e2e_request_latency_seconds", "Time from arrival to the last token.", m,
            s.e2e_latency);
  histogram(out, "zenith:request_queue_time_seconds", "Time a request waited before it ran.", m,
            s.queue_time);
  const std::string sm = "model=\"" + model + "\"";
  header(out, "zenith_serve_requests_total", "counter",
         "Requests answered, by endpoint and HTTP status.");
  for (const auto& [key, n] : http.answered)
    out += "zenith_serve_requests_total{" + sm + ",endpoint=\"" + key.first + "\",status=\"" +
           std::to_string(key.second) + "\"} " + std::to_string(n) + "\n";
  header(out, "zenith_serve_request_seconds", "summary",
         "Time from request to response (to its headers, for streams).");
  out += "zenith_serve_request_seconds_sum{" + sm + "} " + number(http.latency_sum) + "\n";
  out +=
      "zenith_serve_request_seconds_count{" + sm + "} " + std::to_string(http.latency_count) + "\n";
  return out;
}

}  // namespace zenith::serve::llm
