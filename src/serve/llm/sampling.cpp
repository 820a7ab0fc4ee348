#include "serve/llm/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "serve/llm/constraint.h"

namespace zenith::serve::llm {
namespace {

models::GenerationConfig generation_config(const SamplingParams& p, uint64_t seed) {
  auto check = [](bool ok, const char* param, const std::string& message) {
    if (!ok) throw RequestError(message, param);
  };
  check(p.temperature >= 0 && std::isfinite(p.temperature), "temperature",
        "temperature must be >= 0, got " + std::to_string(p.temperature));
  check(p.top_p > 0 && p.top_p <= 1, "top_p",
        "top_p must be in (0, 1], got " + std::to_string(p.top_p));
  check(p.top_k >= 0, "top_k", "top_k must be >= 0 (0: off), got " + std::to_string(p.top_k));
  check(p.repetition_penalty > 0, "repetition_penalty",
        "repetition_penalty must be > 0, got " + std::to_string(p.repetition_penalty));
  check(std::isfinite(p.presence_penalty) && std::abs(p.presence_penalty) <= 2, "presence_penalty",
        "presence_penalty must be in [-2, 2]");
  check(std::isfinite(p.frequency_penalty) && std::abs(p.frequency_penalty) <= 2,
        "frequency_penalty", "frequency_penalty must be in [-2, 2]");
  check(p.top_logprobs >= 0 && p.top_logprobs <= 20, "top_logprobs",
        "top_logprobs must be in [0, 20], got " + std::to_string(p.top_logprobs));
  models::GenerationConfig c;
  c.temperature = p.temperature;
  c.top_k = p.top_k;
  c.top_p = p.top_p;
  c.repetition_penalty = p.repetition_penalty;
  c.seed = seed;
  return c;
}

}  // namespace

RequestSampler::RequestSampler(const SamplingParams& params, uint64_t seed)
    : params_(params), sampler_(generation_config(params, seed)) {}

int64_t RequestSampler::next(std::vector<float>& logits, const std::vector<int64_t>& history,
                             TokenLogprob* logprob) {
  std::vector<float> raw;
  if (logprob) raw = logits;
  if (params_.presence_penalty != 0 || params_.frequency_penalty != 0)
    for (const auto& [id, n] : counts_)
      if (id >= 0 && id < int64_t(logits.size()))
        logits[size_t(id)] -= float(params_.presence_penalty + params_.frequency_penalty * n);
  if (params_.constraint) params_.constraint->mask(logits);
  const int64_t token = sampler_.next(logits, history);
  if (logprob) *logprob = log_softmax_entry(raw, token, params_.top_logprobs);
  return token;
}

void RequestSampler::accept(int64_t token) { ++counts_[token]; }

TokenLogprob log_softmax_entry(const std::vector<float>& logits, int64_t token, int top) {
  const float peak = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(double(l) - peak);
  const double lse = double(peak) + std::log(sum);
  TokenLogprob out;
  out.token = token;
  out.logprob = float(double(logits[size_t(token)]) - lse);
  if (top > 0) {
    std::vector<int64_t> ids(logits.size());
    std::iota(ids.begin(), ids.end(), int64_t(0));
    const auto k = std::min<size_t>(size_t(top), ids.size());
    std::partial_sort(ids.begin(), ids.begin() + long(k), ids.end(), [&](int64_t a, int64_t b) {
      return logits[size_t(a)] > logits[size_t(b)] ||
             (logits[size_t(a)] == logits[size_t(b)] && a < b);
    });
    for (size_t i = 0; i < k; ++i)
      out.top.emplace_back(ids[i], float(double(logits[size_t(ids[i])]) - lse));
  }
  return out;
}

}  // namespace zenith::serve::llm
