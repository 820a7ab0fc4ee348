// ZeRO-3 over a models::Llama without changing it: each module's parameters (embedding, each
// decoder layer, final norm, output layer) are gathered only around its own computation, through
// distributed::sharded_forward. Stages 1 and 2 need nothing of the model: Llama::forward as is.
//
// So that no rank ever holds the whole model, build it shape-only and give ZeRO each rank's rows:
//
//   auto model = distributed::hollow_llama(config);               // no parameter data
//   auto rows = distributed::llama_initial_rows(config, rank, n); // or llama_pretrained_rows(dir)
//   auto zero = std::make_shared<ZeroOptimizer>(model->trainable_params(), make_adamw,
//       ZeroOptions{.stage = 3, .rows_of = distributed::llama_rows_of(*model, std::move(rows))});
//
// Peak memory per rank is then ZeRO-3's model state, 16Ψ/N with AdamW, plus one module gathered
// and the activations: never the 4Ψ of the whole weights.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "distributed/zero.h"
#include "zenith/llama.h"

namespace zenith::models::detail {
class DecoderCell;  // models/llama_layers.h
}  // namespace zenith::models::detail

namespace zenith::distributed {

// Runs fn(x) for `module`, e.g. through sharded_forward with the module's ZeRO parameters.
using ModuleRunner = std::function<Tensor(
    const nn::Cell& module, std::function<Tensor(const Tensor&)> fn, const Tensor& x)>;
// The decoder's final norm output [B, T, D] for input_ids [B, T] with its attention_mask
// (undefined: none), positions 0..T-1, plain RoPE (the caller rejects rope scaling): the
// embedding, each decoder layer and the final norm each run through `run`.
Tensor llama_hidden_by_module(const models::LlamaConfig& c,
                              const models::detail::DecoderCell& decoder, const Tensor& input_ids,
                              const Tensor& attention_mask, const ModuleRunner& run);

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

struct TensorParallelPlan;  // parallelize_llama.h

// ZeRO-3 over the data dimension of a tensor-parallel model (FSDP2 + tensor parallel,
// torchtitan's "2D"): `model` rewritten by parallelize_llama(plan) over the mesh's tensor group,
// `zero` at stage 3 over its data group holding the model's (local) trainable parameters. Each
// module's tensor shards are gathered over the data group around its forward and its backward
// (where the layer's tensor-group collectives run again with the recompute) and freed after;
// their gradients are reduce-scattered over the data group. The loss is zero3_llama_loss's with
// the output layer and cross entropy vocabulary-parallel (tensor_parallel_head_loss). With
// sequence parallelism call zero3_tensor_parallel_sync_gradients after backward.
Tensor zero3_tensor_parallel_llama_loss(models::Llama& model, const TensorParallelPlan& plan,
                                        const std::shared_ptr<ZeroOptimizer>& zero,
                                        const Tensor& input_ids, const Tensor& attention_mask,
                                        const Tensor& labels, double weight, bool has_targets);

// After backward, before clipping: sums over the tensor group the gradient shards of the
// replicated parameters whose gradient is partial on each tensor rank (with sequence
// parallelism the norms' weights): each tensor rank holds the same rows of them. Collective over
// the tensor group; a no-op when there are none.
void zero3_tensor_parallel_sync_gradients(const models::Llama& model,
                                          const TensorParallelPlan& plan,
                                          const ZeroOptimizer& zero);

// A Llama with the cells, names and shapes Llama(config) builds (float32), every parameter
// shape-only: its storage holds no bytes. Only ZeRO-3 with ZeroOptions::rows_of gives it data
// (a module's parameters while it is gathered); anything else that reads a weight fails.
std::shared_ptr<models::Llama> hollow_llama(const models::LlamaConfig& config);

// This rank's rows (dim 0, chunk_of(rows, ranks, rank)) of every parameter, by Hugging Face name.
using LlamaRows = std::map<std::string, Tensor>;
// The rows Llama(config) would initialise from the default generator now, bit for bit: each
// parameter's draws are made in the constructor's order, this rank keeping its rows and skipping
// the others' (two engine draws per normal value), so a rank never holds a whole parameter. The
// generator ends where Llama(config) leaves it.
LlamaRows llama_initial_rows(const models::LlamaConfig& config, int rank, int ranks);
// The rows of a Hugging Face directory's weights (safetensors), each rank reading only its byte
// ranges of the files, converted to `dtype`. The listing is checked against config.json first.
LlamaRows llama_pretrained_rows(const std::string& dir, int rank, int ranks,
                                DType dtype = DType::f32);
// ZeroOptions::rows_of over model.trainable_params() (ZeRO's parameter order) from `rows`; each
// parameter's rows are handed over once (the map's copy is dropped).
std::function<Tensor(size_t, Chunk)> llama_rows_of(const models::Llama& model, LlamaRows rows);

}  // namespace zenith::distributed
