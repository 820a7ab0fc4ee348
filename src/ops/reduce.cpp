// Reductions over dims, with keepdim; gradients broadcast back over the reduced dims.
#include <algorithm>

#include "core/dispatch.h"
#include "zenith/autograd.h"
#include "zenith/ops.h"

namespace zenith::ops {
namespace {

// Sorted, unique, non-negative dims; empty means all.
std::vector<int64_t> normalize_dims(const std::vector<int64_t>& dims, int64_t ndim,
                                    const char* op) {
  std::vector<int64_t> out;
  if (dims.empty()) {
    for (int64_t d = 0; d < ndim; ++d) out.push_back(d);
    return out;
  }
  for (auto d : dims) {
    int64_t n = std::max<int64_t>(ndim, 1);
    ZENITH_CHECK(d >= -n && d < n, "[", op, "] dim ", d, " out of range for ", ndim,
                 "-d tensor");
    out.push_back(d < 0 ? d + n : d);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  if (ndim == 0) out.clear();
  return out;
}

Shape reduced_shape(const Shape& s, const std::vector<int64_t>& dims, bool keepdim) {
  Shape out;
  for (int64_t d = 0; d < int64_t(s.size()); ++d) {
    bool r = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!r) out.push_back(s[size_t(d)]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

// Shape of the reduction with keepdim, for broadcasting a gradient back.
Shape kept_shape(const Shape& s, const std::vector<int64_t>& dims) {
  return reduced_shape(s, dims, true);
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims_in, bool keepdim) {
  auto dims = normalize_dims(dims_in, x.dim(), "sum");
  Shape out_shape = reduced_shape(x.shape(), dims, keepdim);
  Tensor out = dispatch::call1("sum", {x}, {{"dims", dims}, {"out_shape", out_shape}});
  if (autograd::needs_grad({x})) {
    Shape in_shape = x.shape(), kept = kept_shape(x.shape(), dims);
    autograd::record("sum", {x}, {out}, [in_shape, kept](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{g[0].reshape(kept).expand(in_shape)};
    });
  }
  return out;
}

Tensor mean(const Tensor& x, const std::vector<int64_t>& dims_in, bool keepdim) {
  ZENITH_CHECK(is_floating(x.dtype()), "[mean] expected a floating tensor, got ",
               dtype_name(x.dtype()));
  auto dims = normalize_dims(dims_in, x.dim(), "mean");
  int64_t count = 1;
  for (auto d : dims) count *= x.shape()[size_t(d)];
  return div(sum(x, dims, keepdim), double(std::max<int64_t>(count, 1)));
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  int64_t lead = x.dim() - int64_t(shape.size());
  ZENITH_CHECK(lead >= 0, "[sum_to] cannot sum ", shape_str(x.shape()), " to ", shape_str(shape));
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d < lead) {
      dims.push_back(d);
    } else {
      int64_t want = shape[size_t(d - lead)];
      ZENITH_CHECK(want == x.shape()[size_t(d)] || want == 1, "[sum_to] cannot sum ",
                   shape_str(x.shape()), " to ", shape_str(shape));
      if (want == 1 && x.shape()[size_t(d)] != 1) dims.push_back(d);
    }
  }
  Tensor s = dims.empty() ? x : sum(x, dims, true);
  return s.reshape(shape);
}

}  // namespace zenith::ops
