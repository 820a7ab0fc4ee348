// Elementwise binary ops with broadcasting; gradients sum back to each input's shape.
#include <cmath>

#include "backend/cpu/loops.h"
#include "core/dispatch.h"
#include "zenith/autograd.h"
#include "zenith/ops.h"

namespace zenith::ops {
namespace {

// Validates shapes and devices, then dispatches.
Tensor binary(const char* op, const Tensor& a, const Tensor& b) {
  ZENITH_CHECK(a.defined() && b.defined(), "[", op, "] undefined input");
  cpu::broadcast_shapes(a.shape(), b.shape(), op);
  return dispatch::call1(op, {a, b});
}

// A 0-d tensor holding `v`, typed to combine with `like` without changing its dtype
// (PyTorch's rule: a Python scalar does not promote a float tensor).
Tensor scalar_like(double v, const Tensor& like) {
  DType t = like.dtype();
  if (!is_floating(t) && v != std::floor(v)) t = DType::f32;
  return Tensor::scalar(v, t);
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = binary("add", a, b);
  if (autograd::needs_grad({a, b})) {
    Shape sa = a.shape(), sb = b.shape();
    autograd::record("add", {a, b}, {out}, [sa, sb](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{sum_to(g[0], sa), sum_to(g[0], sb)};
    });
  }
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = binary("sub", a, b);
  if (autograd::needs_grad({a, b})) {
    Shape sa = a.shape(), sb = b.shape();
    autograd::record("sub", {a, b}, {out}, [sa, sb](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{sum_to(g[0], sa), neg(sum_to(g[0], sb))};
    });
  }
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary("mul", a, b);
  if (autograd::needs_grad({a, b})) {
    bool ga = a.requires_grad(), gb = b.requires_grad();
    autograd::record("mul", {a, b}, {out}, [a, b, ga, gb](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{ga ? sum_to(mul(g[0], b), a.shape()) : Tensor(),
                                 gb ? sum_to(mul(g[0], a), b.shape()) : Tensor()};
    });
  }
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = binary("div", a, b);
  if (autograd::needs_grad({a, b})) {
    bool gb = b.requires_grad();
    Tensor saved = out.detach();
    autograd::record("div", {a, b}, {out}, [a, b, gb, saved](const std::vector<Tensor>& g) {
      Tensor ga = sum_to(div(g[0], b), a.shape());
      // d(a/b)/db = -(a/b)/b
      Tensor gbv = gb ? neg(sum_to(div(mul(g[0], saved), b), b.shape())) : Tensor();
      return std::vector<Tensor>{ga, gbv};
    });
  }
  return out;
}

Tensor add(const Tensor& a, double b) { return add(a, scalar_like(b, a)); }
Tensor sub(const Tensor& a, double b) { return sub(a, scalar_like(b, a)); }
Tensor mul(const Tensor& a, double b) { return mul(a, scalar_like(b, a)); }
Tensor div(const Tensor& a, double b) { return div(a, scalar_like(b, a)); }

}  // namespace zenith::ops
