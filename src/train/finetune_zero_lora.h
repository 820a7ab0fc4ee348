// zenith finetune --method lora --zero 3: ZeRO-3 over the adapters only. The frozen base (its
// weights in the file's dtype, or quantized) stays whole on every rank; each module's trainable
// parameters (a layer's LoRA factors) are gathered around its forward and again in backward,
// where the layer is recomputed, as distributed::zero3_llama_loss does for full fine-tuning.
#pragma once

#include <memory>

#include "distributed/zero.h"
#include "zenith/llama.h"

namespace zenith::distributed {
struct TensorParallelPlan;  // distributed/parallelize_llama.h
}  // namespace zenith::distributed

namespace zenith::finetune::detail {

// Whether some parameter of `model` is frozen (LoRA's base): the step then runs
// zero3_lora_loss at ZeRO stage 3.
bool has_frozen_parameters(const models::Llama& model);

// zero3_llama_loss's contract (distributed/zero_llama.h) for a model whose frozen parameters are
// not in `zero`: causal_lm_loss of input_ids [B, T] with its attention_mask, times `weight`; a
// batch with no learned label gives 0 times the logits' sum, so that every rank still runs each
// layer's gathers.
Tensor zero3_lora_loss(models::Llama& model,
                       const std::shared_ptr<distributed::ZeroOptimizer>& zero,
                       const Tensor& input_ids, const Tensor& attention_mask, const Tensor& labels,
                       double weight, bool has_targets);

// The same on a tensor-parallel model (zero over the mesh's data group, the frozen base's
// tensor shards whole on each rank): distributed::zero3_tensor_parallel_llama_loss's contract.
// With sequence parallelism or split adapters, distributed::zero3_tensor_parallel_sync_gradients
// after backward sums the partial gradients.
Tensor zero3_tensor_parallel_lora_loss(models::Llama& model,
                                       const distributed::TensorParallelPlan& plan,
                                       const std::shared_ptr<distributed::ZeroOptimizer>& zero,
                                       const Tensor& input_ids, const Tensor& attention_mask,
                                       const Tensor& labels, double weight, bool has_targets);

}  // namespace zenith::finetune::detail
