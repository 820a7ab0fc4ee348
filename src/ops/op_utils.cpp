#include "ops/op_utils.h"

#include <cmath>

namespace zenith::ops::detail {

Tensor plain(const Tensor& x) { return x.has_layout() ? x.contiguous() : x; }

int64_t wrap_dim(int64_t d, int64_t ndim, const char* op) {
  int64_t n = std::max<int64_t>(ndim, 1);
  ZENITH_CHECK(d >= -n && d < n, "[", op, "] dim ", d, " out of range for ", ndim, "-d tensor");
  return d < 0 ? d + n : d;
}

void check_float(const Tensor& x, const char* op) {
  ZENITH_CHECK(x.defined(), "[", op, "] undefined input");
  ZENITH_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::f64, "[", op,
               "] expected float32 or float64, got ", dtype_name(x.dtype()));
}

std::vector<int64_t> pair_option(const std::vector<int64_t>& v, const char* op, const char* name,
                                 int64_t min) {
  ZENITH_CHECK(v.size() == 1 || v.size() == 2, "[", op, "] ", name, " needs 1 or 2 values, got ",
               shape_str(v));
  std::vector<int64_t> out = v.size() == 1 ? std::vector<int64_t>{v[0], v[0]} : v;
  for (auto x : out)
    ZENITH_CHECK(x >= min, "[", op, "] ", name, " must be >= ", min, ", got ", shape_str(v));
  return out;
}

Tensor scalar_like(double v, const Tensor& like) {
  DType t = like.dtype();
  if (!is_floating(t) && v != std::floor(v)) t = DType::f32;
  return Tensor::full({}, v, t, like.device());
}

Tensor scatter_add_into(const Tensor& src, const Tensor& index, int64_t dim, const Shape& shape) {
  Tensor out = dispatch::call1<OpId::scatter_add>({src, index}, {.dim = dim, .shape = shape});
  if (autograd::needs_grad({src})) {
    Shape src_shape = src.shape();
    autograd::record("scatter_add", {src}, {out},
                     [index, dim, src_shape](const std::vector<Tensor>& g) {
                       return std::vector<Tensor>{sum_to(gather(g[0], dim, index), src_shape)};
                     });
  }
  return out;
}

}  // namespace zenith::ops::detail
