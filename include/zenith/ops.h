// The public ops. Each validates its inputs (errors name the op and the shapes), then calls the
// dispatcher with the op's id and typed attributes (src/core/ops.def lists every op); its
// gradient is defined beside it in src/ops/<family>.cpp, written with ops.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "zenith/tensor.h"

namespace zenith::ops {

// ---- elementwise binary, with broadcasting and type promotion (src/ops/binary.cpp)
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, double b);
Tensor pow(const Tensor& a, double exponent);

// ---- elementwise unary (src/ops/unary.cpp)
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x, bool tanh_approx = false);
Tensor silu(const Tensor& x);
Tensor square(const Tensor& x);
Tensor erf(const Tensor& x);
Tensor cast(const Tensor& x, DType dtype);
// grad * (out > 0): relu's gradient from its output, one fused kernel (the hot path of CNNs).
Tensor relu_backward(const Tensor& grad, const Tensor& out);

// ---- comparisons and selection (src/ops/compare.cpp); comparisons return bool, no gradient
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

// ---- reductions (src/ops/reduce.cpp); empty dims = all dims
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor max(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor max(const Tensor& x);  // over all elements
Tensor min(const Tensor& x);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);  // int64, no gradient
Tensor var(const Tensor& x, const std::vector<int64_t>& dims = {}, bool unbiased = true,
           bool keepdim = false);
// Sums `x` down to `shape` (the inverse of broadcasting), used by gradients.
Tensor sum_to(const Tensor& x, const Shape& shape);

// ---- linear algebra (src/ops/matmul.cpp)
// [.., n, k] x [.., k, m] -> [.., n, m] with broadcast batch dims; 1-d operands as in numpy.
Tensor matmul(const Tensor& a, const Tensor& b);
// x [.., in] W [out, in] b [out] -> [.., out]
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// ---- convolution and pooling, NCHW (src/ops/conv.cpp, src/ops/pool.cpp)
struct Conv2dOptions {
  std::vector<int64_t> stride = {1, 1};
  std::vector<int64_t> padding = {0, 0};  // ignored when padding_mode is "same" or "valid"
  std::string padding_mode = "explicit";  // "explicit", "same", "valid"
  std::vector<int64_t> dilation = {1, 1};
  int64_t groups = 1;
};
// x [N, C, H, W], weight [O, C/groups, KH, KW], bias [O] -> [N, O, OH, OW]
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              const Conv2dOptions& options = {});
Tensor max_pool2d(const Tensor& x, std::vector<int64_t> kernel, std::vector<int64_t> stride = {},
                  std::vector<int64_t> padding = {0, 0});
Tensor avg_pool2d(const Tensor& x, std::vector<int64_t> kernel, std::vector<int64_t> stride = {},
                  std::vector<int64_t> padding = {0, 0}, bool count_include_pad = true);
Tensor adaptive_avg_pool2d(const Tensor& x, std::vector<int64_t> output_size);

// ---- normalisation (src/ops/batch_norm.cpp, src/ops/layer_norm.cpp) and dropout
// (src/ops/dropout.cpp)
// In training mode uses batch statistics and updates running_mean/var in place
// (running = (1 - momentum) * running + momentum * batch, unbiased variance as in PyTorch).
Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor running_mean,
                  Tensor running_var, bool training, double momentum = 0.1, double eps = 1e-5);
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                double eps = 1e-6);
Tensor dropout(const Tensor& x, double p, bool training);

// ---- softmax and losses (src/ops/softmax.cpp, src/ops/loss.cpp)
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
// logits [N, C] (or [N, C, d...]); target int64 class indices [N] or dense probabilities [N, C].
// reduction: "mean", "sum", "none".
Tensor cross_entropy(const Tensor& logits, const Tensor& target,
                     const std::string& reduction = "mean", int64_t ignore_index = -100,
                     double label_smoothing = 0.0);
Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");

// ---- indexing and joining (src/ops/index.cpp)
Tensor embedding(const Tensor& weight, const Tensor& indices);  // [V, D] x int [..] -> [.., D]
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim);
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);

// ---- optimizer updates, in place on contiguous tensors of one float dtype, no gradient
// (src/ops/optimizer_update.cpp)
// g = grad + weight_decay param; velocity = momentum velocity + g;
// param -= lr (nesterov ? g + momentum velocity : velocity). Without a velocity: param -= lr g.
void momentum_update(const Tensor& param, const Tensor& grad, const Tensor& velocity, double lr,
                     double momentum, double weight_decay, bool nesterov);
// Adam at 1-based `step` (PyTorch's formulas); decoupled: AdamW's weight decay.
void adam_update(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                 double lr, double beta1, double beta2, double eps, double weight_decay,
                 bool decoupled, int64_t step);

}  // namespace zenith::ops

namespace zenith {

// Operators on tensors and scalars, as in PyTorch.
inline Tensor operator+(const Tensor& a, const Tensor& b) { return ops::add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return ops::sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return ops::mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return ops::div(a, b); }
inline Tensor operator+(const Tensor& a, double b) { return ops::add(a, b); }
inline Tensor operator-(const Tensor& a, double b) { return ops::sub(a, b); }
inline Tensor operator*(const Tensor& a, double b) { return ops::mul(a, b); }
inline Tensor operator/(const Tensor& a, double b) { return ops::div(a, b); }
inline Tensor operator+(double a, const Tensor& b) { return ops::add(b, a); }
inline Tensor operator*(double a, const Tensor& b) { return ops::mul(b, a); }
inline Tensor operator-(double a, const Tensor& b) { return ops::add(ops::neg(b), a); }

}  // namespace zenith
