// Views: new shape/strides/offset over the same storage, each with its gradient.
#include <algorithm>
#include <numeric>
#include <optional>

#include "ops/op_utils.h"

namespace zenith {
namespace {

using ops::detail::plain;
using ops::detail::wrap_dim;

// A view of x's storage; records `backward` when x needs a gradient.
Tensor make_view(const Tensor& x, Shape shape, Shape strides, int64_t offset, const char* op,
                 autograd::BackwardFn backward) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = x.storage();
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = x.dtype();
  impl->device = x.device();
  Tensor out(std::move(impl));
  if (autograd::needs_grad({x})) autograd::record(op, {x}, {out}, std::move(backward));
  return out;
}

// Strides for viewing x as `shape` without copying, or empty when impossible (PyTorch's rule).
std::optional<Shape> view_strides(const Tensor& x, const Shape& shape) {
  if (x.is_contiguous()) return contiguous_strides(shape);
  const Shape& os = x.shape();
  const Shape& ost = x.strides();
  Shape st(shape.size());
  int64_t view_d = int64_t(shape.size()) - 1;
  int64_t chunk_base_stride = ost.empty() ? 1 : ost.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = int64_t(os.size()) - 1; d >= 0; --d) {
    tensor_numel *= os[size_t(d)];
    if (d == 0 ||
        (os[size_t(d - 1)] != 1 && ost[size_t(d - 1)] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[size_t(view_d)] == 1)) {
        st[size_t(view_d)] = view_numel * chunk_base_stride;
        view_numel *= shape[size_t(view_d)];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = ost[size_t(d - 1)];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return st;
}

Shape infer_shape(const Shape& requested, int64_t numel, const char* op) {
  Shape s = requested;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      ZENITH_CHECK(infer < 0, "[", op, "] only one dimension can be -1, got ", shape_str(s));
      infer = int64_t(i);
    } else {
      ZENITH_CHECK(s[i] >= 0, "[", op, "] invalid size in ", shape_str(s));
      known *= s[i];
    }
  }
  if (infer >= 0) {
    ZENITH_CHECK(known > 0 && numel % known == 0, "[", op, "] shape ", shape_str(requested),
                 " is invalid for ", numel, " elements");
    s[size_t(infer)] = numel / known;
  }
  ZENITH_CHECK(shape_numel(s) == numel, "[", op, "] shape ", shape_str(requested),
               " is invalid for input of ", numel, " elements");
  return s;
}

}  // namespace

Tensor Tensor::view(const Shape& requested) const {
  Tensor x = plain(*this);
  Shape s = infer_shape(requested, numel(), "view");
  auto st = view_strides(x, s);
  ZENITH_CHECK(st.has_value(), "[view] shape ", shape_str(s),
               " is not compatible with the "
               "strides of a ",
               shape_str(shape()), " view; use reshape()");
  Shape in_shape = shape();
  return make_view(x, s, *st, x.offset(), "view", [in_shape](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{g[0].reshape(in_shape)};
  });
}

Tensor Tensor::reshape(const Shape& requested) const {
  Tensor x = plain(*this);
  Shape s = infer_shape(requested, numel(), "reshape");
  if (view_strides(x, s)) return x.view(s);
  return x.contiguous().view(s);
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  int64_t n = dim();
  if (n == 0) return reshape({1});
  start_dim = wrap_dim(start_dim, n, "flatten");
  end_dim = wrap_dim(end_dim, n, "flatten");
  ZENITH_CHECK(start_dim <= end_dim, "[flatten] start_dim ", start_dim, " > end_dim ", end_dim);
  Shape s;
  for (int64_t d = 0; d < start_dim; ++d) s.push_back(shape()[size_t(d)]);
  int64_t m = 1;
  for (int64_t d = start_dim; d <= end_dim; ++d) m *= shape()[size_t(d)];
  s.push_back(m);
  for (int64_t d = end_dim + 1; d < n; ++d) s.push_back(shape()[size_t(d)]);
  return reshape(s);
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  Tensor x = plain(*this);
  int64_t n = dim();
  ZENITH_CHECK(int64_t(dims.size()) == n, "[permute] got ", dims.size(), " dims for a ", n,
               "-d tensor");
  Shape s(static_cast<size_t>(n)), st(static_cast<size_t>(n));
  std::vector<int64_t> inverse(static_cast<size_t>(n), -1);
  for (int64_t i = 0; i < n; ++i) {
    int64_t d = wrap_dim(dims[size_t(i)], n, "permute");
    ZENITH_CHECK(inverse[size_t(d)] < 0, "[permute] dim ", d, " repeated");
    inverse[size_t(d)] = i;
    s[size_t(i)] = x.shape()[size_t(d)];
    st[size_t(i)] = x.strides()[size_t(d)];
  }
  return make_view(x, s, st, x.offset(), "permute", [inverse](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{g[0].permute(inverse)};
  });
}

Tensor Tensor::transpose(int64_t a, int64_t b) const {
  int64_t n = dim();
  a = wrap_dim(a, n, "transpose");
  b = wrap_dim(b, n, "transpose");
  std::vector<int64_t> dims(static_cast<size_t>(n));
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[size_t(a)], dims[size_t(b)]);
  return permute(dims);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  Tensor x = plain(*this);
  d = wrap_dim(d, dim(), "slice");
  ZENITH_CHECK(step > 0, "[slice] step must be positive, got ", step);
  int64_t size = x.shape()[size_t(d)];
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  Shape s = x.shape(), st = x.strides();
  s[size_t(d)] = (end - start + step - 1) / step;
  st[size_t(d)] *= step;
  Shape in_shape = x.shape();
  DType dtype = x.dtype();
  return make_view(x, s, st, x.offset() + start * x.strides()[size_t(d)], "slice",
                   [=](const std::vector<Tensor>& g) {
                     Tensor gi = Tensor::zeros(in_shape, dtype, g[0].device());
                     gi.slice(d, start, end, step).copy_(g[0]);
                     // In a create_graph backward this gradient is differentiated in turn.
                     if (autograd::needs_grad({g[0]}))
                       autograd::record(
                           "slice_backward", {g[0]}, {gi}, [=](const std::vector<Tensor>& gg) {
                             return std::vector<Tensor>{gg[0].slice(d, start, end, step)};
                           });
                     return std::vector<Tensor>{gi};
                   });
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  d = wrap_dim(d, dim(), "select");
  int64_t size = shape()[size_t(d)];
  ZENITH_CHECK(index >= -size && index < size, "[select] index ", index, " out of range for dim ",
               d, " of size ", size);
  if (index < 0) index += size;
  return slice(d, index, index + 1).squeeze(d);
}

Tensor Tensor::expand(const Shape& requested) const {
  Tensor x = plain(*this);
  int64_t n = int64_t(requested.size()), xd = x.dim();
  ZENITH_CHECK(n >= xd, "[expand] cannot expand ", shape_str(x.shape()), " to ",
               shape_str(requested));
  Shape s(static_cast<size_t>(n)), st(static_cast<size_t>(n), 0);
  for (int64_t i = n - 1; i >= 0; --i) {
    int64_t j = i - (n - xd);
    int64_t want = requested[size_t(i)];
    if (j >= 0) {
      int64_t have = x.shape()[size_t(j)];
      if (want == -1) want = have;
      ZENITH_CHECK(have == want || have == 1, "[expand] cannot expand ", shape_str(x.shape()),
                   " to ", shape_str(requested));
      st[size_t(i)] = have == want ? x.strides()[size_t(j)] : 0;
    } else {
      ZENITH_CHECK(want >= 0, "[expand] -1 not allowed for new leading dims");
    }
    s[size_t(i)] = want;
  }
  Shape in_shape = x.shape();
  return make_view(x, s, st, x.offset(), "expand", [in_shape](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{ops::sum_to(g[0], in_shape)};
  });
}

Tensor Tensor::squeeze(int64_t d) const {
  d = wrap_dim(d, dim(), "squeeze");
  if (shape()[size_t(d)] != 1) return *this;
  Tensor x = plain(*this);
  Shape s = x.shape(), st = x.strides();
  s.erase(s.begin() + d);
  st.erase(st.begin() + d);
  Shape in_shape = x.shape();
  return make_view(x, s, st, x.offset(), "squeeze", [in_shape](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{g[0].reshape(in_shape)};
  });
}

Tensor Tensor::unsqueeze(int64_t d) const {
  Tensor x = plain(*this);
  d = wrap_dim(d, dim() + 1, "unsqueeze");
  Shape s = x.shape(), st = x.strides();
  int64_t stride = d < dim() ? st[size_t(d)] * s[size_t(d)] : 1;
  s.insert(s.begin() + d, 1);
  st.insert(st.begin() + d, stride);
  Shape in_shape = x.shape();
  return make_view(x, s, st, x.offset(), "unsqueeze", [in_shape](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{g[0].reshape(in_shape)};
  });
}

}  // namespace zenith
