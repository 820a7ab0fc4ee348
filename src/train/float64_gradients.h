// The data-parallel side of zenith finetune: which share of each step's examples this rank
// takes, and the sums over ranks that make N ranks of batch B train as one process with batch
// N*B (token-weighted: every rank's loss is weighted by its share of the step's learned labels,
// and the gradients are summed, not averaged).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ops/weight_grad_sink.h"
#include "zenith/tensor.h"

namespace zenith::finetune {

class Ranks {
 public:
  // The job's ranks when communication::init() has run, else the single process.
  Ranks();
  int rank() const { return rank_; }
  int world() const { return world_; }
  // Rank 0 writes the outputs (adapters, checkpoints, metrics, logs).
  bool writes() const { return rank_ == 0; }

  // This rank's [begin, end) of a global micro-batch [first, first + world * batch) clipped at
  // n: rank r takes the r-th run of `batch` examples (empty when there are too few).
  std::pair<int64_t, int64_t> share(int64_t first, int64_t batch, int64_t n) const;
  // Each value summed over the ranks (one collective for all of them).
  std::vector<double> sum(std::vector<double> values) const;
  // Every gradient of `params` summed over the ranks in `dtype`, in one collective (a parameter
  // without a gradient on this rank contributes zeros), and left in the parameter's dtype:
  // float64 gradients (Float64Gradients; every rank passes float64, whether it had examples or
  // not) are rounded to float32 once, here.
  void sum_gradients(const std::vector<Tensor>& params, DType dtype = DType::f32) const;

 private:
  int rank_ = 0, world_ = 1;
};

// While installed (ops::WeightGradScope), the weight gradients of the linear layers among
// `params` are summed in float64 over the rows of every micro-batch, and finish() leaves them as
// the parameters' (float64) gradients for Ranks::sum_gradients to sum and round once. A float32
// sum over B*T rows depends on how the rows are split (one process's GEMM vs the ranks' halves
// added); the float64 one rounds to the same float32 whatever the split, so N ranks of batch B
// update as one process of batch N*B to the bit (what DDP = one process asks). Meant for small
// trainable weights (LoRA adapters: ~2 * M * r * (in + out) flops a layer); full fine-tuning
// keeps float32 sums (the loop is ~out * in * M multiply-adds, no GEMM).
class Float64Gradients : public ops::WeightGradSink {
 public:
  explicit Float64Gradients(const std::vector<Tensor>& params);
  bool take(const Tensor& weight, const Tensor& dy, const Tensor& x) override;
  // Moves the sums into the parameters' gradients (float64), added to any they have.
  void finish();

 private:
  std::unordered_map<const void*, Tensor> params_;  // by TensorImpl: the parameter
  std::unordered_map<const void*, Tensor> sums_;    // by TensorImpl: its float64 sum
};

}  // namespace zenith::finetune
