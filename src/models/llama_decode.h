// The decoding loop behind generate(), shared with model-parallel decoding
// (distributed::tensor_parallel_generate) so both stop and stream the same way.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "zenith/llama.h"

namespace zenith::models {

// generate()'s checks on `prompt` and `config` against `c` (errors name the value: an empty
// prompt, an id outside [0, vocab_size), a prompt that fills the context, max_new_tokens < 0,
// bad sampling settings). Returns how many tokens to generate: max_new_tokens, or fewer where the
// context (max_position_embeddings) fills first.
int64_t generation_budget(const LlamaConfig& c, const std::vector<int64_t>& prompt,
                          const GenerationConfig& config);

// Samples up to `budget` tokens after `prompt`. `forward(ids)` runs the model on ids [1, T] —
// the prompt first, then each chosen id as [1, 1] — and returns the last position's logits
// [1, 1, V]; it is not called when budget is 0. Stops at an eos id or after `budget` tokens
// (stop_reason "context" where the budget is below max_new_tokens); `on_token` sees each id.
GenerationResult decode_tokens(const std::vector<int64_t>& prompt, int64_t budget,
                               const GenerationConfig& config,
                               const std::function<Tensor(const Tensor&)>& forward,
                               const std::function<void(int64_t)>& on_token);

}  // namespace zenith::models
