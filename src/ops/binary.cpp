// Elementwise binary ops with broadcasting; gradients sum back to each input's shape.
#include <cmath>

#include "core/shape.h"
#include "ops/op_utils.h"

namespace zenith::ops {
namespace {

using detail::plain;
using detail::scalar_like;

// Validates shapes, then dispatches.
template <OpId op>
Tensor binary(const Tensor& a, const Tensor& b) {
  ZENITH_CHECK(a.defined() && b.defined(), "[", op_name(op), "] undefined input");
  broadcast_shapes(a.shape(), b.shape(), op_name(op));
  // Layout (oneDNN blocked) operands: the dispatcher makes them plain unless the kernel is
  // layout-aware (add/sub/mul, see backend/cpu/onednn_layout.h).
  return dispatch::call1<op>({a, b});
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = binary<OpId::add>(a, b);
  if (autograd::needs_grad({a, b})) {
    Shape sa = a.shape(), sb = b.shape();
    autograd::record("add", {a, b}, {out}, [sa, sb](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{sum_to(g[0], sa), sum_to(g[0], sb)};
    });
  }
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = binary<OpId::sub>(a, b);
  if (autograd::needs_grad({a, b})) {
    Shape sa = a.shape(), sb = b.shape();
    autograd::record("sub", {a, b}, {out}, [sa, sb](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{sum_to(g[0], sa), neg(sum_to(g[0], sb))};
    });
  }
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary<OpId::mul>(a, b);
  if (autograd::needs_grad({a, b})) {
    const bool ga = a.requires_grad(), gb = b.requires_grad();
    // Each factor is saved only for the other's gradient: x * constant keeps no copy of x.
    const Tensor saved_a = gb ? a : Tensor(), saved_b = ga ? b : Tensor();
    const Shape sa = a.shape(), sb = b.shape();
    autograd::record("mul", {a, b}, {out}, [=](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{ga ? sum_to(mul(g[0], saved_b), sa) : Tensor(),
                                 gb ? sum_to(mul(g[0], saved_a), sb) : Tensor()};
    });
  }
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = binary<OpId::div>(a, b);
  if (autograd::needs_grad({a, b})) {
    bool gb = b.requires_grad();
    autograd::SavedOutput saved(out);
    autograd::record("div", {a, b}, {out}, [a, b, gb, saved](const std::vector<Tensor>& g) {
      Tensor ga = sum_to(div(g[0], b), a.shape());
      // d(a/b)/db = -(a/b)/b
      Tensor gbv = gb ? neg(sum_to(div(mul(g[0], saved.get()), b), b.shape())) : Tensor();
      return std::vector<Tensor>{ga, gbv};
    });
  }
  return out;
}

Tensor pow(const Tensor& a, const Tensor& b) {
  Tensor out = binary<OpId::pow>(a, b);
  if (autograd::needs_grad({a, b})) {
    bool ga = a.requires_grad(), gb = b.requires_grad();
    autograd::SavedOutput saved(out);
    autograd::record("pow", {a, b}, {out}, [a, b, ga, gb, saved](const std::vector<Tensor>& g) {
      Tensor zero = scalar_like(0.0, g[0]);
      Tensor da, db;
      if (ga) {
        // b a^(b-1), defined as 0 where b == 0 (PyTorch's convention, avoids 0 * inf at a = 0)
        Tensor d = mul(g[0], mul(b, pow(a, sub(b, 1.0))));
        da = sum_to(where(eq(b, zero), zero, d), a.shape());
      }
      if (gb) {
        // a^b log(a), defined as 0 where a == 0 and b >= 0
        Tensor d = mul(g[0], mul(saved.get(), log(a)));
        Tensor no = Tensor::full({}, 0.0, DType::b8, a.device());
        Tensor at_zero = where(eq(a, zero), ge(b, zero), no);
        db = sum_to(where(at_zero, zero, d), b.shape());
      }
      return std::vector<Tensor>{da, db};
    });
  }
  return out;
}

// Gradient of maximum/minimum: to the selected operand, split half/half on ties (PyTorch).
template <OpId op>
static Tensor select_binary(const Tensor& a, const Tensor& b, bool is_max) {
  Tensor out = binary<op>(a, b);
  if (autograd::needs_grad({a, b})) {
    autograd::record(op_name(op), {a, b}, {out}, [a, b, is_max](const std::vector<Tensor>& g) {
      DType dt = g[0].dtype();
      Tensor a_wins = (is_max ? gt(a, b) : lt(a, b)).to(dt);
      Tensor wa = add(a_wins, mul(eq(a, b).to(dt), 0.5));  // weight of a; b gets 1 - wa
      Tensor ga = mul(g[0], wa);
      return std::vector<Tensor>{sum_to(ga, a.shape()), sum_to(sub(g[0], ga), b.shape())};
    });
  }
  return out;
}

Tensor maximum(const Tensor& a, const Tensor& b) {
  return select_binary<OpId::maximum>(a, b, true);
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  return select_binary<OpId::minimum>(a, b, false);
}

Tensor pow(const Tensor& a_in, double exponent) {
  ZENITH_CHECK(a_in.defined(), "[pow] undefined input");
  Tensor a = plain(a_in);
  ZENITH_CHECK(a.dtype() != DType::b8, "[pow] not supported on bool tensors, got shape ",
               shape_str(a.shape()));
  bool integral_exponent = exponent == std::floor(exponent);
  if (!is_floating(a.dtype())) {
    if (!integral_exponent) {
      a = a.to(DType::f32);
    } else {
      ZENITH_CHECK(exponent >= 0, "[pow] integer tensors (shape ", shape_str(a.shape()),
                   ") cannot be raised to the negative power ", exponent);
    }
  }
  Tensor out = dispatch::call1<OpId::pow_scalar>({a}, {.exponent = exponent});
  if (autograd::needs_grad({a})) {
    autograd::record("pow_scalar", {a}, {out}, [a, exponent](const std::vector<Tensor>& g) {
      if (exponent == 0)
        return std::vector<Tensor>{Tensor::zeros(a.shape(), g[0].dtype(), a.device())};
      return std::vector<Tensor>{mul(g[0], mul(pow(a, exponent - 1), exponent))};
    });
  }
  return out;
}

Tensor add(const Tensor& a, double b) { return add(a, scalar_like(b, a)); }
Tensor sub(const Tensor& a, double b) { return sub(a, scalar_like(b, a)); }
Tensor mul(const Tensor& a, double b) { return mul(a, scalar_like(b, a)); }
Tensor div(const Tensor& a, double b) { return div(a, scalar_like(b, a)); }

}  // namespace zenith::ops
