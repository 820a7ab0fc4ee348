// What the platform reads from a service's /metrics text (Prometheus exposition) each second:
// its model requests, for the request rate, and single samples such as the request latency's
// sum and count. An LLM service's engine series are LlmSeries' (llm_series.h).
#pragma once

#include <cstdint>
#include <string>

namespace zenith::platform {

// Sum of zenith_serve_requests_total over the model endpoints: infer and classify (KServe), and
// chat_completions and completions (an LLM service's OpenAI API).
std::int64_t model_requests(const std::string& metrics);

// The value of the first sample line of `metrics` whose name is `name` (any labels); 0 if absent.
double metric_value(const std::string& metrics, const std::string& name);

}  // namespace zenith::platform
