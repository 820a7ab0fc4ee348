// One request's sampling step: the log-probabilities of the raw logits (logprobs), OpenAI's
// presence and frequency penalties on the tokens generated so far, the grammar mask of a
// constrained request, then models::TokenSampler (HF's repetition penalty, greedy at temperature
// 0, else temperature, top-k, top-p and a seeded splitmix64 draw, as `zenith generate`).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "serve/llm/engine.h"

namespace zenith::serve::llm {

class RequestSampler {
 public:
  // Throws RequestError naming the field for settings the sampler refuses.
  RequestSampler(const SamplingParams& params, uint64_t seed);
  // Picks the next id from `logits` (one row, modified); `history` is prompt + generated ids.
  // With logprobs on, `*logprob` gets the chosen id's and the top alternatives.
  int64_t next(std::vector<float>& logits, const std::vector<int64_t>& history,
               TokenLogprob* logprob);
  // Records a generated id (for the penalties and the constraint).
  void accept(int64_t token);

 private:
  SamplingParams params_;
  models::TokenSampler sampler_;
  std::map<int64_t, int64_t> counts_;  // generated ids -> times
};

// log_softmax(logits)[token] and the `top` largest entries, best first (ties: lower id first).
TokenLogprob log_softmax_entry(const std::vector<float>& logits, int64_t token, int top);

}  // namespace zenith::serve::llm
