// softmax and log_softmax over one dim. Each gradient is an op of the list given the output,
// defined by its decomposition into ops here; the CPU registers a fused kernel for both.
#include "ops/op_utils.h"

namespace zenith::ops {
namespace {

template <OpId op, OpId backward_op>
Tensor softmax_impl(const Tensor& x_in, int64_t dim_in) {
  const char* name = op_name(op);
  ZENITH_CHECK(x_in.defined(), "[", name, "] undefined input");
  Tensor x = detail::plain(x_in);
  if (!is_floating(x.dtype())) x = x.to(DType::f32);
  int64_t n = std::max<int64_t>(x.dim(), 1);
  ZENITH_CHECK(dim_in >= -n && dim_in < n, "[", name, "] dim ", dim_in, " out of range for shape ",
               shape_str(x.shape()));
  const SoftmaxAttrs attrs{.dim = dim_in < 0 ? dim_in + n : dim_in};
  Tensor out = dispatch::call1<op>({x}, attrs);
  if (autograd::needs_grad({x})) {
    autograd::SavedOutput y(out);
    autograd::record(name, {x}, {out}, [y, attrs](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{dispatch::call1<backward_op>({g[0], y.get()}, attrs)};
    });
  }
  return out;
}

// The sum over the softmax dim, kept (a 0-d tensor has none).
Tensor sum_dim(const Tensor& x, int64_t dim) { return x.dim() == 0 ? x : sum(x, {dim}, true); }

// dx = y (dy - sum_dim(dy y))
std::vector<Tensor> softmax_backward_composed(const std::vector<Tensor>& in,
                                              const SoftmaxAttrs& a) {
  const Tensor& y = in[1];
  Tensor dy = in[0].dtype() == y.dtype() ? in[0] : in[0].to(y.dtype());
  return {mul(y, sub(dy, sum_dim(mul(dy, y), a.dim)))};
}

// dx = dy - exp(y) sum_dim(dy)
std::vector<Tensor> log_softmax_backward_composed(const std::vector<Tensor>& in,
                                                  const SoftmaxAttrs& a) {
  const Tensor& y = in[1];
  Tensor dy = in[0].dtype() == y.dtype() ? in[0] : in[0].to(y.dtype());
  return {sub(dy, mul(exp(y), sum_dim(dy, a.dim)))};
}

ZENITH_REGISTER_DECOMPOSITION(softmax_backward, softmax_backward_composed);
ZENITH_REGISTER_DECOMPOSITION(log_softmax_backward, log_softmax_backward_composed);

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) {
  return softmax_impl<OpId::softmax, OpId::softmax_backward>(x, dim);
}

Tensor log_softmax(const Tensor& x, int64_t dim) {
  return softmax_impl<OpId::log_softmax, OpId::log_softmax_backward>(x, dim);
}

}  // namespace zenith::ops
