// Comparisons (bool results, no gradient) and selection: where, masked_fill.
#include "core/shape.h"
#include "ops/op_utils.h"

namespace zenith::ops {
namespace {

using detail::plain;

template <OpId op>
Tensor compare(const Tensor& a, const Tensor& b) {
  ZENITH_CHECK(a.defined() && b.defined(), "[", op_name(op), "] undefined input");
  broadcast_shapes(a.shape(), b.shape(), op_name(op));
  return dispatch::call1<op>({plain(a), plain(b)});
}

}  // namespace

Tensor eq(const Tensor& a, const Tensor& b) { return compare<OpId::eq>(a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare<OpId::ne>(a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare<OpId::lt>(a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return compare<OpId::le>(a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare<OpId::gt>(a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare<OpId::ge>(a, b); }

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  ZENITH_CHECK(cond.defined() && a.defined() && b.defined(), "[where] undefined input");
  ZENITH_CHECK(cond.dtype() == DType::b8, "[where] condition must be bool, got ",
               dtype_name(cond.dtype()), " of shape ", shape_str(cond.shape()));
  try {
    broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  } catch (const Error&) {
    ZENITH_FAIL("[where] shapes ", shape_str(cond.shape()), " (condition), ", shape_str(a.shape()),
                " and ", shape_str(b.shape()), " cannot be broadcast together");
  }
  Tensor out = dispatch::call1<OpId::where>({plain(cond), plain(a), plain(b)});
  if (autograd::needs_grad({a, b})) {
    bool ga = a.requires_grad(), gb = b.requires_grad();
    Shape sa = a.shape(), sb = b.shape();
    Tensor c = cond.detach();
    autograd::record("where", {a, b}, {out}, [c, ga, gb, sa, sb](const std::vector<Tensor>& g) {
      Tensor zero = detail::scalar_like(0.0, g[0]);
      return std::vector<Tensor>{ga ? sum_to(where(c, g[0], zero), sa) : Tensor(),
                                 gb ? sum_to(where(c, zero, g[0]), sb) : Tensor()};
    });
  }
  return out;
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  ZENITH_CHECK(x.defined() && mask.defined(), "[masked_fill] undefined input");
  ZENITH_CHECK(mask.dtype() == DType::b8, "[masked_fill] mask must be bool, got ",
               dtype_name(mask.dtype()), " of shape ", shape_str(mask.shape()));
  bool fits = mask.dim() <= x.dim();
  for (int64_t i = 1; fits && i <= mask.dim(); ++i) {
    int64_t m = mask.shape()[size_t(mask.dim() - i)], s = x.shape()[size_t(x.dim() - i)];
    fits = m == s || m == 1;
  }
  ZENITH_CHECK(fits, "[masked_fill] mask of shape ", shape_str(mask.shape()),
               " does not broadcast to the input's shape ", shape_str(x.shape()));
  Tensor m = plain(mask);
  Tensor out = dispatch::call1<OpId::masked_fill>({plain(x), m}, {.value = value});
  if (autograd::needs_grad({x})) {
    Tensor md = m.detach();
    autograd::record("masked_fill", {x}, {out}, [md](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{masked_fill(g[0], md, 0.0)};
    });
  }
  return out;
}

}  // namespace zenith::ops
