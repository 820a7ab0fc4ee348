// The live series of an LLM service, for the dashboard's service page: each second the platform
// scrapes the service's /metrics (vLLM's names under `zenith:`, see serve/llm/openai_metrics.h)
// and turns its counters and histograms into one sample per interval: mean time to first token
// and inter-token latency of the tokens that came in it, generated tokens per second, requests
// running and waiting, and KV cache use. The last kMaxSamples samples are kept in memory.
#pragma once

#include <cstddef>
#include <deque>
#include <nlohmann/json.hpp>
#include <string>

namespace zenith::platform {

class LlmSeries {
 public:
  static constexpr std::size_t kMaxSamples = 600;  // 10 minutes at one sample a second

  // Adds the sample of a scrape taken at `now` (Unix seconds). A /metrics text without the
  // `zenith:` engine series (a CNN service) adds nothing and returns false. Counters that went
  // down (the service restarted) start a new baseline: that interval's rates are null.
  bool add(double now, const std::string& metrics);
  bool empty() const { return samples_.empty(); }
  // Columns: time, ttft_ms, itl_ms, tokens_per_s, running, waiting, kv_cache_usage (0..1);
  // null where an interval had no such event (no first token, no second token).
  nlohmann::json to_json() const;

 private:
  struct Sample {
    double time = 0;
    double ttft_ms = -1, itl_ms = -1, tokens_per_s = -1;  // -1: none in the interval
    double running = 0, waiting = 0, kv_cache_usage = 0;
  };
  struct Counters {
    double time = 0, ttft_sum = 0, ttft_count = 0, itl_sum = 0, itl_count = 0, tokens = 0;
  };
  std::deque<Sample> samples_;
  Counters last_;
  bool have_last_ = false;
};

}  // namespace zenith::platform
