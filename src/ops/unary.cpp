// Elementwise unary ops and their gradients. Each gradient is one fused kernel
// ("<op>_backward"(dy, saved)) rather than a chain of elementwise ops.
#include "core/dispatch.h"
#include "zenith/autograd.h"
#include "zenith/ops.h"

namespace zenith::ops {
namespace {

// Backend layouts (e.g. oneDNN blocked) are converted to plain before an elementwise kernel.
Tensor plain(const Tensor& x) { return x.has_layout() ? x.contiguous() : x; }

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

Tensor backward_kernel(const char* op, const Tensor& dy, const Tensor& saved) {
  return dispatch::call1(op, {dy, saved});
}

// out = op(x); its gradient is `backward_op`(dy, saved), saved = x or out (detached).
enum class Saved { kInput, kOutput };
Tensor unary(const char* op, const char* backward_op, Saved saved_kind, const Tensor& x) {
  Tensor out = dispatch::call1(op, {x});
  if (autograd::needs_grad({x})) {
    Tensor saved = saved_kind == Saved::kInput ? x.detach() : out.detach();
    autograd::record(op, {x}, {out}, [backward_op, saved](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{backward_kernel(backward_op, g[0], saved)};
    });
  }
  return out;
}

}  // namespace

Tensor neg(const Tensor& x_in) {
  Tensor x = checked(x_in, "neg");
  Tensor out = dispatch::call1("neg", {x});
  if (autograd::needs_grad({x}))
    autograd::record("neg", {x}, {out},
                     [](const std::vector<Tensor>& g) { return std::vector<Tensor>{neg(g[0])}; });
  return out;
}

Tensor exp(const Tensor& x) {
  return unary("exp", "exp_backward", Saved::kOutput, float_input(x, "exp"));
}
Tensor log(const Tensor& x) {
  return unary("log", "log_backward", Saved::kInput, float_input(x, "log"));
}
Tensor sqrt(const Tensor& x) {
  return unary("sqrt", "sqrt_backward", Saved::kOutput, float_input(x, "sqrt"));
}
Tensor rsqrt(const Tensor& x) {
  return unary("rsqrt", "rsqrt_backward", Saved::kOutput, float_input(x, "rsqrt"));
}
Tensor abs(const Tensor& x) {
  return unary("abs", "abs_backward", Saved::kInput, checked(x, "abs"));
}
Tensor tanh(const Tensor& x) {
  return unary("tanh", "tanh_backward", Saved::kOutput, float_input(x, "tanh"));
}
Tensor sigmoid(const Tensor& x) {
  return unary("sigmoid", "sigmoid_backward", Saved::kOutput, float_input(x, "sigmoid"));
}
Tensor relu(const Tensor& x) {
  // Blocked (oneDNN) activations stay blocked: the relu kernels are layout-aware.
  Tensor in = x.defined() && x.has_layout() ? x : checked(x, "relu");
  return unary("relu", "relu_backward", Saved::kOutput, in);
}
Tensor gelu(const Tensor& x, bool tanh_approx) {
  Tensor in = float_input(x, "gelu");
  return tanh_approx ? unary("gelu_tanh", "gelu_tanh_backward", Saved::kInput, in)
                     : unary("gelu", "gelu_backward", Saved::kInput, in);
}
Tensor silu(const Tensor& x) {
  return unary("silu", "silu_backward", Saved::kInput, float_input(x, "silu"));
}
Tensor square(const Tensor& x) {
  return unary("square", "square_backward", Saved::kInput, checked(x, "square"));
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
  return backward_kernel("relu_backward", g, o);
}

}  // namespace zenith::ops
