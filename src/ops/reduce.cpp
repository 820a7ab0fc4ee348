// Reductions over dims, with keepdim; gradients broadcast back over the reduced dims.
#include <algorithm>

#include "ops/op_utils.h"

namespace zenith::ops {
namespace {

using detail::plain;
using detail::wrap_dim;

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
    ZENITH_CHECK(d >= -n && d < n, "[", op, "] dim ", d, " out of range for ", ndim, "-d tensor");
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
    if (!r)
      out.push_back(s[size_t(d)]);
    else if (keepdim)
      out.push_back(1);
  }
  return out;
}

// Shape of the reduction with keepdim, for broadcasting a gradient back.
Shape kept_shape(const Shape& s, const std::vector<int64_t>& dims) {
  return reduced_shape(s, dims, true);
}

// Values (and int64 indices) of the max/min over `dim`. The gradient goes to the selected index.
template <OpId kernel>
std::vector<Tensor> minmax_dim(const char* op, const Tensor& x_in, int64_t dim_in, bool keepdim) {
  ZENITH_CHECK(x_in.defined(), "[", op, "] undefined input");
  Tensor x = plain(x_in);
  int64_t dim = wrap_dim(dim_in, x.dim(), op);
  ZENITH_CHECK(x.dim() == 0 || x.shape()[size_t(dim)] > 0, "[", op, "] cannot reduce dim ", dim,
               " of size 0 in shape ", shape_str(x.shape()));
  std::vector<int64_t> dims;
  if (x.dim() > 0) dims.push_back(dim);
  Shape out_shape = reduced_shape(x.shape(), dims, keepdim);
  auto outs = dispatch::call<kernel>({x}, {.dim = dim, .out_shape = out_shape});
  if (autograd::needs_grad({x})) {
    Shape in_shape = x.shape(), kept = kept_shape(x.shape(), dims);
    Tensor idx = outs[1].reshape(kept);
    autograd::record(op, {x}, {outs[0]}, [in_shape, kept, idx, dim](const std::vector<Tensor>& g) {
      Tensor gk = g[0].reshape(kept);
      return std::vector<Tensor>{detail::scatter_add_into(gk, idx, dim, in_shape)};
    });
  }
  return outs;
}

// max()/min() over all elements; ties share the gradient evenly (PyTorch's rule).
template <OpId kernel>
Tensor minmax_all(const char* op, const Tensor& x_in) {
  ZENITH_CHECK(x_in.defined(), "[", op, "] undefined input");
  Tensor x = plain(x_in);
  ZENITH_CHECK(x.numel() > 0, "[", op, "] cannot reduce an empty tensor of shape ",
               shape_str(x.shape()));
  Tensor out = dispatch::call1<kernel>({x});
  if (autograd::needs_grad({x})) {
    Tensor xd = x.detach(), od = out.detach();
    autograd::record(op, {x}, {out}, [xd, od](const std::vector<Tensor>& g) {
      Tensor hit = eq(xd, od).to(g[0].dtype());
      return std::vector<Tensor>{mul(hit, div(g[0], sum(hit)))};
    });
  }
  return out;
}

}  // namespace

Tensor max(const Tensor& x, int64_t dim, bool keepdim) {
  return minmax_dim<OpId::max_dim>("max", x, dim, keepdim)[0];
}
Tensor min(const Tensor& x, int64_t dim, bool keepdim) {
  return minmax_dim<OpId::min_dim>("min", x, dim, keepdim)[0];
}
Tensor max(const Tensor& x) { return minmax_all<OpId::max_all>("max", x); }
Tensor min(const Tensor& x) { return minmax_all<OpId::min_all>("min", x); }

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  NoGradGuard no_grad;
  return minmax_dim<OpId::max_dim>("argmax", x, dim, keepdim)[1];
}

Tensor var(const Tensor& x_in, const std::vector<int64_t>& dims_in, bool unbiased, bool keepdim) {
  ZENITH_CHECK(x_in.defined(), "[var] undefined input");
  Tensor x = plain(x_in);
  ZENITH_CHECK(is_floating(x.dtype()), "[var] expected a floating tensor, got ",
               dtype_name(x.dtype()), " of shape ", shape_str(x.shape()));
  auto dims = normalize_dims(dims_in, x.dim(), "var");
  Shape out_shape = reduced_shape(x.shape(), dims, keepdim);
  int64_t count = 1;
  for (auto d : dims) count *= x.shape()[size_t(d)];
  int64_t correction = unbiased ? 1 : 0;
  Tensor out = dispatch::call1<OpId::var>(
      {x}, {.dims = dims, .out_shape = out_shape, .correction = correction});
  if (autograd::needs_grad({x})) {
    Shape kept = kept_shape(x.shape(), dims);
    autograd::record("var", {x}, {out},
                     [x, dims, kept, count, correction](const std::vector<Tensor>& g) {
                       // d var / dx = 2 (x - mean) / (n - correction)
                       Tensor centered = sub(x, mean(x, dims, true));
                       Tensor scale = div(g[0].reshape(kept), double(count - correction) / 2.0);
                       return std::vector<Tensor>{mul(centered, scale)};
                     });
  }
  return out;
}

Tensor sum(const Tensor& x_in, const std::vector<int64_t>& dims_in, bool keepdim) {
  ZENITH_CHECK(x_in.defined(), "[sum] undefined input");
  Tensor x = plain(x_in);
  auto dims = normalize_dims(dims_in, x.dim(), "sum");
  Shape out_shape = reduced_shape(x.shape(), dims, keepdim);
  Tensor out = dispatch::call1<OpId::sum>({x}, {.dims = dims, .out_shape = out_shape});
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
