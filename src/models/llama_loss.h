// causal_lm_loss(model, input, labels) (zenith/llama.h) with another normalizer: the summed
// cross entropy divided by `normalizer` instead of this batch's targets, its gradients scaled by
// 1 / normalizer alike. Data-parallel ranks and gradient accumulation pass the step's targets, so
// every part carries the same float 1 / targets as one batch of all of them would.
#pragma once

#include "zenith/llama.h"

namespace zenith::models {

Tensor causal_lm_loss_over(Llama& model, const LlamaInput& input, const Tensor& labels,
                           double normalizer);

}  // namespace zenith::models
