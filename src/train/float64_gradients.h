// Float64Gradients: a LoRA adapter's weight gradients summed in float64, so that data-parallel
// fine-tuning (Ranks::sum_gradients, train/ranks.h) updates as one process to the bit.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "ops/weight_grad_sink.h"
#include "zenith/tensor.h"

namespace zenith::finetune {

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
