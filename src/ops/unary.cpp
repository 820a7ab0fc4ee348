// Elementwise unary ops and their gradients. Each gradient is an op of the list,
// <op>_backward(dy, saved), defined here by a decomposition into ops (so every backend
// differentiates it, twice if needed); a backend may register a fused kernel for it as a fast
// path (the CPU does for relu_backward, the hot path of CNNs, and for silu_backward and
// gelu_backward, those of transformer MLPs).
#include <cmath>

#include "ops/op_utils.h"

namespace zenith::ops {
namespace {

using detail::plain;

constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;     // 1 / sqrt(2 pi)
constexpr double kTwoOverSqrtPi = 1.12837916709551257390;  // 2 / sqrt(pi)
constexpr double kGeluTanhScale = 0.79788456080286535588;  // sqrt(2 / pi)
constexpr double kGeluTanhCubic = 0.044715;

Tensor checked(const Tensor& x, const char* op) {
  ZENITH_CHECK(x.defined(), "[", op, "] undefined input");
  ZENITH_CHECK(x.dtype() != DType::b8, "[", op, "] not supported on bool tensors, got shape ",
               shape_str(x.shape()));
  return plain(x);
}

// Transcendental ops compute in float: integer inputs are promoted to float32 (as in PyTorch).
Tensor float_input(const Tensor& x, const char* op) {
  ZENITH_CHECK(x.defined(), "[", op, "] undefined input");
  Tensor p = plain(x);
  return is_floating(p.dtype()) ? p : p.to(DType::f32);
}

// out = op(x); its gradient is backward_op(dy, x) or backward_op(dy, out).
enum class Saved { kInput, kOutput };
template <OpId op, OpId backward_op>
Tensor unary(const Tensor& x, Saved saved) {
  Tensor out = dispatch::call1<op>({x});
  if (autograd::needs_grad({x})) {
    if (saved == Saved::kInput) {
      autograd::record(op_name(op), {x}, {out}, [x](const std::vector<Tensor>& g) {
        return std::vector<Tensor>{dispatch::call1<backward_op>({g[0], x})};
      });
    } else {
      autograd::SavedOutput y(out);
      autograd::record(op_name(op), {x}, {out}, [y](const std::vector<Tensor>& g) {
        return std::vector<Tensor>{dispatch::call1<backward_op>({g[0], y.get()})};
      });
    }
  }
  return out;
}

// ---- the gradients as ops: dx = f(dy, saved), in saved's dtype and shape

Tensor in_dtype_of(const Tensor& dy, const Tensor& saved) {
  return dy.dtype() == saved.dtype() ? dy : dy.to(saved.dtype());
}

// dy * sign(x), sign(0) = 0
std::vector<Tensor> abs_backward_composed(const std::vector<Tensor>& in, const NoAttrs&) {
  const Tensor& x = in[1];
  Tensor zero = detail::scalar_like(0.0, x);
  Tensor sign = sub(gt(x, zero).to(x.dtype()), lt(x, zero).to(x.dtype()));
  return {mul(in_dtype_of(in[0], x), sign)};
}
// 2 x dy
std::vector<Tensor> square_backward_composed(const std::vector<Tensor>& in, const NoAttrs&) {
  return {mul(mul(in_dtype_of(in[0], in[1]), in[1]), 2.0)};
}
// dy where y > 0, else 0
std::vector<Tensor> relu_backward_composed(const std::vector<Tensor>& in, const NoAttrs&) {
  const Tensor& y = in[1];
  Tensor zero = detail::scalar_like(0.0, y);
  return {where(gt(y, zero), in_dtype_of(in[0], y), zero)};
}
// dy y
std::vector<Tensor> exp_backward_composed(const std::vector<Tensor>& in, const NoAttrs&) {
  return {mul(in_dtype_of(in[0], in[1]), in[1])};
}
// dy / x
std::vector<Tensor> log_backward_composed(const std::vector<Tensor>& in, const NoAttrs&) {
  return {div(in_dtype_of(in[0], in[1]), in[1])};
}
// dy / (2 y)
std::vector<Tensor> sqrt_backward_composed(const std::vector<Tensor>& in, const NoAttrs&) {
  return {div(mul(in_dtype_of(in[0], in[1]), 0.5), in[1])};
}
// -dy y^3 / 2
std::vector<Tensor> rsqrt_backward_composed(const std::vector<Tensor>& in, const NoAttrs&) {
  const Tensor& y = in[1];
  return {mul(mul(in_dtype_of(in[0], y), -0.5), mul(y, square(y)))};
}
// dy (1 - y^2)
std::vector<Tensor> tanh_backward_composed(const std::vector<Tensor>& in, const NoAttrs&) {
  const Tensor& y = in[1];
  return {mul(in_dtype_of(in[0], y), 1.0 - square(y))};
}
// dy y (1 - y)
std::vector<Tensor> sigmoid_backward_composed(const std::vector<Tensor>& in, const NoAttrs&) {
  const Tensor& y = in[1];
  return {mul(in_dtype_of(in[0], y), mul(y, 1.0 - y))};
}
// dy s (1 + x (1 - s)), s = sigmoid(x)
std::vector<Tensor> silu_backward_composed(const std::vector<Tensor>& in, const NoAttrs&) {
  const Tensor& x = in[1];
  Tensor s = sigmoid(x);
  return {mul(in_dtype_of(in[0], x), mul(s, add(mul(x, 1.0 - s), 1.0)))};
}
// dy (Phi(x) + x phi(x)), Phi(x) = (1 + erf(x / sqrt 2)) / 2, phi(x) = exp(-x^2/2) / sqrt(2 pi)
std::vector<Tensor> gelu_backward_composed(const std::vector<Tensor>& in, const NoAttrs&) {
  const Tensor& x = in[1];
  Tensor cdf = mul(add(erf(mul(x, kInvSqrt2)), 1.0), 0.5);
  Tensor pdf = mul(exp(mul(square(x), -0.5)), kInvSqrt2Pi);
  return {mul(in_dtype_of(in[0], x), add(cdf, mul(x, pdf)))};
}
// dy ((1 + t) / 2 + x / 2 (1 - t^2) u'), t = tanh(u), u = sqrt(2/pi) (x + 0.044715 x^3)
std::vector<Tensor> gelu_tanh_backward_composed(const std::vector<Tensor>& in, const NoAttrs&) {
  const Tensor& x = in[1];
  Tensor x2 = square(x);
  Tensor u = mul(mul(x, add(mul(x2, kGeluTanhCubic), 1.0)), kGeluTanhScale);
  Tensor t = tanh(u);
  Tensor du = mul(add(mul(x2, 3 * kGeluTanhCubic), 1.0), kGeluTanhScale);
  Tensor d = add(mul(add(t, 1.0), 0.5), mul(mul(mul(x, 0.5), 1.0 - square(t)), du));
  return {mul(in_dtype_of(in[0], x), d)};
}
// dy 2 / sqrt(pi) exp(-x^2)
std::vector<Tensor> erf_backward_composed(const std::vector<Tensor>& in, const NoAttrs&) {
  const Tensor& x = in[1];
  return {mul(in_dtype_of(in[0], x), mul(exp(neg(square(x))), kTwoOverSqrtPi))};
}

ZENITH_REGISTER_DECOMPOSITION(abs_backward, abs_backward_composed);
ZENITH_REGISTER_DECOMPOSITION(square_backward, square_backward_composed);
ZENITH_REGISTER_DECOMPOSITION(relu_backward, relu_backward_composed);
ZENITH_REGISTER_DECOMPOSITION(exp_backward, exp_backward_composed);
ZENITH_REGISTER_DECOMPOSITION(log_backward, log_backward_composed);
ZENITH_REGISTER_DECOMPOSITION(sqrt_backward, sqrt_backward_composed);
ZENITH_REGISTER_DECOMPOSITION(rsqrt_backward, rsqrt_backward_composed);
ZENITH_REGISTER_DECOMPOSITION(tanh_backward, tanh_backward_composed);
ZENITH_REGISTER_DECOMPOSITION(sigmoid_backward, sigmoid_backward_composed);
ZENITH_REGISTER_DECOMPOSITION(silu_backward, silu_backward_composed);
ZENITH_REGISTER_DECOMPOSITION(gelu_backward, gelu_backward_composed);
ZENITH_REGISTER_DECOMPOSITION(gelu_tanh_backward, gelu_tanh_backward_composed);
ZENITH_REGISTER_DECOMPOSITION(erf_backward, erf_backward_composed);

}  // namespace

Tensor neg(const Tensor& x_in) {
  Tensor x = checked(x_in, "neg");
  Tensor out = dispatch::call1<OpId::neg>({x});
  if (autograd::needs_grad({x}))
    autograd::record("neg", {x}, {out},
                     [](const std::vector<Tensor>& g) { return std::vector<Tensor>{neg(g[0])}; });
  return out;
}

Tensor exp(const Tensor& x) {
  return unary<OpId::exp, OpId::exp_backward>(float_input(x, "exp"), Saved::kOutput);
}
Tensor log(const Tensor& x) {
  return unary<OpId::log, OpId::log_backward>(float_input(x, "log"), Saved::kInput);
}
Tensor sqrt(const Tensor& x) {
  return unary<OpId::sqrt, OpId::sqrt_backward>(float_input(x, "sqrt"), Saved::kOutput);
}
Tensor rsqrt(const Tensor& x) {
  return unary<OpId::rsqrt, OpId::rsqrt_backward>(float_input(x, "rsqrt"), Saved::kOutput);
}
Tensor abs(const Tensor& x) {
  return unary<OpId::abs, OpId::abs_backward>(checked(x, "abs"), Saved::kInput);
}
Tensor tanh(const Tensor& x) {
  return unary<OpId::tanh, OpId::tanh_backward>(float_input(x, "tanh"), Saved::kOutput);
}
Tensor sigmoid(const Tensor& x) {
  return unary<OpId::sigmoid, OpId::sigmoid_backward>(float_input(x, "sigmoid"), Saved::kOutput);
}
Tensor relu(const Tensor& x) {
  // Blocked (oneDNN) activations stay blocked: the relu kernels are layout-aware.
  Tensor in = x.defined() && x.has_layout() ? x : checked(x, "relu");
  return unary<OpId::relu, OpId::relu_backward>(in, Saved::kOutput);
}
Tensor gelu(const Tensor& x, bool tanh_approx) {
  Tensor in = float_input(x, "gelu");
  return tanh_approx ? unary<OpId::gelu_tanh, OpId::gelu_tanh_backward>(in, Saved::kInput)
                     : unary<OpId::gelu, OpId::gelu_backward>(in, Saved::kInput);
}
Tensor silu(const Tensor& x) {
  return unary<OpId::silu, OpId::silu_backward>(float_input(x, "silu"), Saved::kInput);
}
Tensor square(const Tensor& x) {
  return unary<OpId::square, OpId::square_backward>(checked(x, "square"), Saved::kInput);
}
Tensor erf(const Tensor& x) {
  return unary<OpId::erf, OpId::erf_backward>(float_input(x, "erf"), Saved::kInput);
}

Tensor relu_backward(const Tensor& grad, const Tensor& out) {
  ZENITH_CHECK(grad.defined() && out.defined(), "[relu_backward] undefined input");
  ZENITH_CHECK(is_floating(out.dtype()), "[relu_backward] expected a floating output, got ",
               dtype_name(out.dtype()));
  const Tensor& o = out;  // blocked (oneDNN) tensors stay blocked: the kernel is layout-aware
  const Tensor& g = grad;
  ZENITH_CHECK(g.dim() <= o.dim(), "[relu_backward] grad ", shape_str(g.shape()),
               " does not broadcast to output ", shape_str(o.shape()));
  for (int64_t i = 1; i <= g.dim(); ++i) {
    int64_t gs = g.shape()[size_t(g.dim() - i)], os = o.shape()[size_t(o.dim() - i)];
    ZENITH_CHECK(gs == os || gs == 1, "[relu_backward] grad ", shape_str(g.shape()),
                 " does not broadcast to output ", shape_str(o.shape()));
  }
  return dispatch::call1<OpId::relu_backward>({g, o});
}

}  // namespace zenith::ops

namespace zenith {
Tensor Tensor::operator-() const { return ops::neg(*this); }
}  // namespace zenith
