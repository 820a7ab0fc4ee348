// softmax and log_softmax over one dim; each gradient is one fused kernel given the output.
#include "core/dispatch.h"
#include "zenith/autograd.h"
#include "zenith/ops.h"

namespace zenith::ops {
namespace {

Tensor softmax_impl(const char* op, const char* backward_op, const Tensor& x_in, int64_t dim_in) {
  ZENITH_CHECK(x_in.defined(), "[", op, "] undefined input");
  Tensor x = x_in.has_layout() ? x_in.contiguous() : x_in;
  if (!is_floating(x.dtype())) x = x.to(DType::f32);
  int64_t n = std::max<int64_t>(x.dim(), 1);
  ZENITH_CHECK(dim_in >= -n && dim_in < n, "[", op, "] dim ", dim_in, " out of range for shape ",
               shape_str(x.shape()));
  int64_t dim = dim_in < 0 ? dim_in + n : dim_in;
  Tensor out = dispatch::call1(op, {x}, {{"dim", dim}});
  if (autograd::needs_grad({x})) {
    Tensor y = out.detach();
    autograd::record(op, {x}, {out}, [backward_op, y, dim](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{dispatch::call1(backward_op, {g[0], y}, {{"dim", dim}})};
    });
  }
  return out;
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) {
  return softmax_impl("softmax", "softmax_backward", x, dim);
}

Tensor log_softmax(const Tensor& x, int64_t dim) {
  return softmax_impl("log_softmax", "log_softmax_backward", x, dim);
}

}  // namespace zenith::ops
