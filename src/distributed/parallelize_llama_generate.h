// Decoding with a KV cache on a model rewritten for tensor parallelism (parallelize_llama): every
// rank of the tensor group calls it with the same prompt and settings and gets the tokens one
// process's models::generate would give (greedy, or sampled with the same seed).
//
//   auto plan = distributed::parallelize_llama(*model, {.group = mesh.tensor_group()});
//   auto out = distributed::tensor_parallel_generate(*model, plan, prompt,
//                                                    {.max_new_tokens = 32, .temperature = 0});
//
// Each rank caches the keys and values of its own key/value heads (Hkv / n of them), so the
// cache, like the weights, is split n ways; each step's logits are the rank's vocabulary rows,
// all-gathered over the group before the sampler (HF's processors, as models::generate) picks.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "distributed/parallelize_llama.h"
#include "zenith/llama.h"

namespace zenith::distributed {

// models::generate over `plan`'s tensor group: the same errors, stop reasons and tokens.
// Refused (naming it): a plan with sequence parallelism (one decoded token cannot be split over
// the sequence). A collective: every rank of the group must call it.
models::GenerationResult tensor_parallel_generate(
    models::Llama& model, const TensorParallelPlan& plan, const std::vector<int64_t>& prompt,
    const models::GenerationConfig& config, const std::function<void(int64_t)>& on_token = {});

}  // namespace zenith::distributed
