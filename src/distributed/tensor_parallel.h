// Tensor parallelism (Megatron-LM's): linear layers split over the ranks of a tensor group, the
// autograd functions that move activations and gradients between them, the vocabulary-parallel
// embedding and cross entropy, and gradient clipping that counts each shard once.
//
//   column-parallel   y_r = x W_r^T          W's rows (outputs) split; x whole, y stays split
//   row-parallel      y = sum_r x_r W_r^T    W's columns (inputs) split; partial sums all-reduced
//
// so an MLP or an attention block costs one all-reduce forward and one backward. With sequence
// parallelism the activations between blocks are split along the sequence instead of
// replicated: the all-reduce becomes a reduce-scatter and the column-parallel input an
// all-gather (same bytes, activation memory of norms and residuals / degree).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "zenith/communication.h"
#include "zenith/lora.h"

namespace zenith::distributed {

// ---- autograd collectives over a tensor group (float32, any shape)

// Identity forward; all-reduce (sum) of the gradient backward (Megatron's f).
Tensor copy_to_tensor_parallel(const Tensor& x, const communication::Group& group);
// All-reduce (sum) forward; identity backward (Megatron's g).
Tensor reduce_from_tensor_parallel(const Tensor& x, const communication::Group& group);
// All-gather of sequence chunks along `dim` forward; reduce-scatter backward.
Tensor gather_sequence(const Tensor& x, int64_t dim, const communication::Group& group);
// Reduce-scatter along `dim` forward (each rank keeps its chunk of the sum); all-gather backward.
Tensor reduce_scatter_sequence(const Tensor& x, int64_t dim, const communication::Group& group);
// This rank's chunk along `dim` forward; all-gather backward.
Tensor split_sequence(const Tensor& x, int64_t dim, const communication::Group& group);

// Every rank's x concatenated along `dim`, in rank order (no autograd).
Tensor all_gather_along(const Tensor& x, int64_t dim, const communication::Group& group);

// ---- layers (they are LoraLinear cells, so module paths, adapters and freezing still work)

struct TensorParallelGroup {
  communication::Group group{};  // default: the world
  bool sequence_parallel = false;
  int rank() const;
  int size() const;
};

// The sequence-gathered input that the column-parallel layers reading one tensor share
// (q, k and v; gate and up): gathered once in forward, dropped by the row-parallel layer that
// closes the block, so no full-sequence copy outlives the block's forward.
struct SequenceGather {
  std::weak_ptr<TensorImpl> input;
  Tensor gathered;
};

// Rows [rank * out / size, ...) of the full layer: input replicated, output split on its last
// dimension. Sequence parallel: the input is split along dim 1 and gathered; the layer keeps
// only its slice for backward and gathers it again there (Megatron's way: the full-sequence
// input is never kept).
class ColumnParallelLinear : public nn::LoraLinear {
 public:
  ColumnParallelLinear(Tensor weight_shard, Tensor bias_shard, TensorParallelGroup tp,
                       std::shared_ptr<SequenceGather> gather = nullptr);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "ColumnParallelLinear"; }

 private:
  TensorParallelGroup tp_;
  std::shared_ptr<SequenceGather> gather_;
};

// Columns [rank * in / size, ...) of the full layer: input split on its last dimension, output
// the all-reduced sum (sequence parallel: reduce-scattered along dim 1), bias added once after.
// `closes` is the block's SequenceGather, released after this layer's forward.
class RowParallelLinear : public nn::LoraLinear {
 public:
  RowParallelLinear(Tensor weight_shard, Tensor bias, TensorParallelGroup tp,
                    std::shared_ptr<SequenceGather> closes = nullptr);
  Tensor forward(const Tensor& x) override;
  const Tensor& full_bias() const { return bias_; }
  std::string type_name() const override { return "RowParallelLinear"; }

 private:
  TensorParallelGroup tp_;
  Tensor bias_;
  std::shared_ptr<SequenceGather> closes_;
};

// Rows (weights [out, in] in HF's layout) or columns of `full` for `rank` of `size`: a copy.
Tensor shard_rows(const Tensor& full, int rank, int size);
Tensor shard_columns(const Tensor& full, int rank, int size);
// Points `t`'s handle (shared with its cell and any optimizer) at `data`: how a parameter is
// replaced by its shard, or emptied on a pipeline stage that does not hold it.
void replace_data(Tensor& t, const Tensor& data);

// ---- vocabulary parallel

// Embedding lookup of ids [B, T] in this rank's rows [vocab_start, vocab_start + rows) of the
// table: ids elsewhere give zeros, and the sum over ranks (all-reduce; sequence parallel:
// reduce-scatter along T) is the full lookup.
Tensor vocab_parallel_embedding(const Tensor& weight_shard, const Tensor& ids, int64_t vocab_start,
                                const TensorParallelGroup& tp);

// Mean cross entropy of logits split over the vocabulary: logits_shard [N, V / size] holds
// columns [vocab_start, ...) of this rank; targets [N] (global ids, -100 ignored) are the same
// on every rank. The max and the sum of exponentials are all-reduced, so no rank holds [N, V].
// The gradient flows to logits_shard.
Tensor vocab_parallel_cross_entropy(const Tensor& logits_shard, const std::vector<int64_t>& targets,
                                    int64_t vocab_start, const communication::Group& group);

// ---- gradient clipping

// The global L2 norm of every gradient, counting each shard once: sum of squares of `sharded`
// all-reduced over the group plus that of `replicated` (the same on every rank); then every
// gradient is scaled by max_norm / (norm + 1e-6) when that is below 1 (nn::clip_grad_norm's
// rule). max_norm <= 0: the norm only. Returns the norm before clipping.
double clip_grad_norm_tensor_parallel(const std::vector<Tensor>& sharded,
                                      const std::vector<Tensor>& replicated, double max_norm,
                                      const communication::Group& group);

}  // namespace zenith::distributed
