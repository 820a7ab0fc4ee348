// Takes linear weight gradients (dW = dy^T x over the rows of dy [M, out] and x [M, in]) in place
// of autograd while a WeightGradScope installs it: ops::linear's backward offers each weight, and
// a weight taken gets no gradient from autograd. Data-parallel fine-tuning sums them in float64
// so that the sum does not depend on how the batch is split (train/finetune_ranks.h).
#pragma once

#include "zenith/tensor.h"

namespace zenith::ops {

class WeightGradSink {
 public:
  virtual ~WeightGradSink() = default;
  // True when it took dW of `weight` (then autograd gives the weight none).
  virtual bool take(const Tensor& weight, const Tensor& dy, const Tensor& x) = 0;
};

// Installs a sink for its lifetime (one at a time per process; nullptr installs none).
class WeightGradScope {
 public:
  explicit WeightGradScope(WeightGradSink* sink);
  ~WeightGradScope();
  WeightGradScope(const WeightGradScope&) = delete;
  WeightGradScope& operator=(const WeightGradScope&) = delete;

 private:
  WeightGradSink* previous_;
};

// The installed sink, or nullptr.
WeightGradSink* weight_grad_sink();

}  // namespace zenith::ops
