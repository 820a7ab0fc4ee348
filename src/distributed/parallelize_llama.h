// Tensor parallelism applied to a built models::Llama from outside, as PyTorch's
// parallelize_module: its cells are rewritten in place, src/models knows nothing of it.
//
//   communication::init();
//   auto model = std::make_shared<models::Llama>(config);           // or from_pretrained
//   auto tp = distributed::parallelize_llama(*model, {.group = mesh.tensor_group()});
//   Tensor loss = distributed::tensor_parallel_lm_loss(*model, tp, input, labels);
//   loss.backward();
//   tp.sync_gradients(*model);                   // partial sums: LoRA factors, sequence parallel
//   double norm = tp.clip_grad_norm(*model, 1.0);                     // each shard once
//   opt->step();
//
// ParallelLlama (parallelize_llama_train.h) combines this with pipeline and data parallelism.
//
// After it, on tensor rank r of degree n: q/k/v, gate and up are column-parallel (rows r of n:
// heads r * H / n ..., key/value heads likewise, so grouped-query sharing stays local), o and
// down row-parallel, the embedding and the output layer hold vocabulary rows r of n (a tied
// output layer is the embedding, so the two stay one tensor). Parameter names stay HF's; their
// shapes are the shards'. The model's own forward() then gives this rank's logits [B, T, V / n]
// and its causal_lm_loss must not be used: tensor_parallel_lm_loss is the loss.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "distributed/tensor_parallel.h"
#include "zenith/llama.h"

namespace zenith::distributed {

struct TensorParallelPlan {
  TensorParallelGroup tp;
  int64_t vocab_start = 0;  // first vocabulary row this rank holds
  int64_t vocab_rows = 0;
  // Parameter name -> the dimension it is split on (0 rows, 1 columns); absent: replicated.
  std::map<std::string, int> sharded;
  // Replicated parameters whose gradient on each rank is a partial sum (the unsplit factor of a
  // LoRA adapter): sync_gradients sums them.
  std::set<std::string> partial_gradients;

  int rank() const { return tp.rank(); }
  int degree() const { return tp.size(); }
  // The model's parameters split in two, by `sharded`.
  std::vector<Tensor> sharded_parameters(const models::Llama& model) const;
  std::vector<Tensor> replicated_parameters(const models::Llama& model) const;
  // This rank's block of a full (one-process) tensor named `name`, for comparisons and loading.
  Tensor shard_of(const std::string& name, const Tensor& full) const;
  // The global gradient norm (each shard once; max_norm > 0 also clips). Call sync_gradients
  // first.
  double clip_grad_norm(const models::Llama& model, double max_norm) const;
  // After backward, before clipping and the optimizer step: sums over the tensor group the
  // gradients that are partial on each rank: partial_gradients, and with sequence parallelism
  // every replicated parameter's (norm weights). A no-op when there are none.
  void sync_gradients(const models::Llama& model) const;
};

// Checks that `degree` divides the heads, key/value heads, intermediate size and vocabulary,
// naming the setting and the degree when not.
void check_tensor_parallel(const models::LlamaConfig& config, int degree);

// Rewrites `model` for tensor parallelism over tp.group (every rank of the group calls it with
// the same full model, e.g. the same checkpoint). LoRA adapters already on the model (add_lora,
// load_lora: before, as one process would) are split with their base layer; lm_head may not
// carry one. Decoding with a KV cache: tensor_parallel_generate (parallelize_llama_generate.h).
TensorParallelPlan parallelize_llama(models::Llama& model, TensorParallelGroup tp);

// HF's causal-LM loss (shifted labels, -100 ignored, mean) with the output layer and cross
// entropy vocabulary-parallel: no rank holds [B, T, V].
Tensor tensor_parallel_lm_loss(models::Llama& model, const TensorParallelPlan& plan,
                               const models::LlamaInput& input, const Tensor& labels);
// The model's weights under HF's names, whole (each shard all-gathered over the group; every
// rank gets them all, adapters excluded): models::Llama(config, state, ...).save_pretrained on
// one rank writes the model one process would.
std::map<std::string, Tensor> tensor_parallel_full_state(const models::Llama& model,
                                                         const TensorParallelPlan& plan);

// The model's adapters as one process would save them (each split factor all-gathered over the
// group; every rank gets the whole adapter): io::save_lora_adapter it on one rank.
io::LoraAdapter tensor_parallel_lora_adapter(const models::Llama& model,
                                             const TensorParallelPlan& plan,
                                             const io::LoraConfig& config);

// The same from the final norm's output `hidden` [B, T, D] (sequence parallel: [B, T / n, D]).
Tensor tensor_parallel_head_loss(const models::Llama& model, const TensorParallelPlan& plan,
                                 const Tensor& hidden, const Tensor& labels);

}  // namespace zenith::distributed
