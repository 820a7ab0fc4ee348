// ZeRO-3 over a models::Llama without changing it: each module's parameters (embedding, each
// decoder layer, final norm, output layer) are gathered only around its own computation, through
// distributed::sharded_forward. Stages 1 and 2 need nothing of the model: Llama::forward as is.
#pragma once

#include <memory>

#include "distributed/zero.h"
#include "zenith/llama.h"

namespace zenith::distributed {

// The model's logits [B, T, V] for input_ids [B, T] (no padding mask, positions 0..T-1), every
// module run through ZeRO-3. `zero` holds the model's trainable parameters at stage 3.
Tensor zero3_llama_logits(models::Llama& model, const std::shared_ptr<ZeroOptimizer>& zero,
                          const Tensor& input_ids);

// zenith finetune's micro-batch loss at stage 3: causal_lm_loss of the logits of input_ids
// [B, T] with its attention_mask (undefined: none), times `weight` (the batch's share of the
// step's learned labels). A batch with no learned label gives 0 times the logits' sum: every
// rank must still run each module's gathers, and its gradients are zeros.
Tensor zero3_llama_loss(models::Llama& model, const std::shared_ptr<ZeroOptimizer>& zero,
                        const Tensor& input_ids, const Tensor& attention_mask, const Tensor& labels,
                        double weight, bool has_targets);

}  // namespace zenith::distributed
