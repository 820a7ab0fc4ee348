// The LLM service's Prometheus exposition: vLLM's metric names under a `zenith:` prefix (what
// vLLM calls vllm:time_to_first_token_seconds is zenith:time_to_first_token_seconds here), from
// the engine's counters, plus the HTTP answers as zenith_serve_* (the KServe service's names,
// which the platform samples for `zenith services`).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "serve/llm/engine.h"

namespace zenith::serve::llm {

struct HttpCounts {
  std::map<std::pair<std::string, int>, uint64_t> answered;  // (endpoint, status) -> answers
  double latency_sum = 0;
  uint64_t latency_count = 0;
};

std::string metrics_text(const std::string& model, const EngineStats& stats,
                         const HttpCounts& http);

}  // namespace zenith::serve::llm
