// Batch norm pieces shared by the plain (batch_norm.cpp) and blocked (batch_norm_blocked.cpp)
// kernels.
#pragma once

#include <algorithm>
#include <vector>

#include "zenith/tensor.h"

namespace zenith::cpu {

// N batch, C channels, S spatial elements per channel and sample (H * W, or 1 for [N, C]).
struct BnGeometry {
  int64_t N, C, S;
  explicit BnGeometry(const Shape& x)
      : N(x[0]), C(x[1]), S(shape_numel(x) / std::max<int64_t>(x[0] * x[1], 1)) {}
  int64_t count() const { return N * S; }
};

// running = (1 - momentum) * running + momentum * batch; the variance unbiased (PyTorch).
template <typename T>
void update_running(const Tensor& rm, const Tensor& rv, const T* mean, const T* var,
                    const BnGeometry& g, double momentum) {
  if (!rm.defined()) return;
  ZENITH_CHECK(rm.is_contiguous() && rv.is_contiguous() && rm.dtype() == DTypeOf<T>::value &&
                   rv.dtype() == DTypeOf<T>::value,
               "[batch_norm] running statistics must be contiguous ", dtype_name(DTypeOf<T>::value),
               " tensors");
  T* pm = rm.data<T>();
  T* pv = rv.data<T>();
  const double n = double(g.count());
  const double unbias = n > 1 ? n / (n - 1) : 1.0;
  for (int64_t c = 0; c < g.C; ++c) {
    pm[c] = T((1 - momentum) * double(pm[c]) + momentum * double(mean[c]));
    pv[c] = T((1 - momentum) * double(pv[c]) + momentum * double(var[c]) * unbias);
  }
}

// B when x is a layout tensor stored [N][C/B][spatial...][B] (oneDNN's nChw16c / nChw8c, no
// padding), else 0.
int64_t channel_block(const Tensor& x);

// batch_norm / batch_norm_backward (same inputs and outputs as the kernels) on such tensors;
// outputs keep x's layout. relu: batch_norm_relu's output relu(y); relu_y: batch_norm_relu's
// backward, dy masked by that output (as relu_backward) in the same pass.
std::vector<Tensor> bn_forward_blocked(const std::vector<Tensor>& in, bool training,
                                       double momentum, double eps, bool relu = false);
std::vector<Tensor> bn_backward_blocked(const std::vector<Tensor>& in, bool training, double eps,
                                        const Tensor& relu_y = Tensor());

}  // namespace zenith::cpu
