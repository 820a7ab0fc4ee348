// Indexing and joining: embedding, cat, stack, index_select, gather. Gradients of the gathers
// scatter-add back into a zero tensor of the input's shape (detail::scatter_add_into);
// embedding's gradient is the op embedding_backward, a scatter-add of rows by decomposition
// with a fused CPU kernel. A bfloat16/float16 table gives float32 rows (16-bit LLaMA weights,
// float32 activations).
#include "ops/op_utils.h"

namespace zenith::ops {
namespace {

using detail::plain;
using detail::scatter_add_into;
using detail::wrap_dim;

void check_index_dtype(const Tensor& index, const char* op) {
  ZENITH_CHECK(index.defined(), "[", op, "] undefined index");
  ZENITH_CHECK(index.dtype() == DType::i64 || index.dtype() == DType::i32, "[", op,
               "] index must be int64 or int32, got ", dtype_name(index.dtype()), " of shape ",
               shape_str(index.shape()));
}

// Whether t is the legacy 1-d empty tensor that cat skips (as PyTorch does).
bool skipped_by_cat(const Tensor& t, int64_t ndim) {
  return ndim != 1 && t.dim() == 1 && t.numel() == 0;
}

// embedding_backward(dy [.., D], indices [..]; num_rows) -> [num_rows, D]: the rows of dy
// added at their indices.
std::vector<Tensor> embedding_backward_composed(const std::vector<Tensor>& in,
                                                const EmbeddingBackwardAttrs& a) {
  const int64_t d = in[0].shape().back(), n = in[1].numel();
  Tensor rows = in[0].reshape({n, d});
  Tensor index = in[1].reshape({n, 1}).expand({n, d});
  return {scatter_add_into(rows, index, 0, {a.num_rows, d})};
}

ZENITH_REGISTER_DECOMPOSITION(embedding_backward, embedding_backward_composed);

}  // namespace

Tensor embedding(const Tensor& weight_in, const Tensor& indices) {
  ZENITH_CHECK(weight_in.defined(), "[embedding] undefined weight");
  check_index_dtype(indices, "embedding");
  Tensor weight = plain(weight_in);
  ZENITH_CHECK(weight.dim() == 2, "[embedding] weight must be 2-d [num_embeddings, dim], got ",
               shape_str(weight.shape()));
  Tensor out = dispatch::call1<OpId::embedding>({weight, indices});
  if (autograd::needs_grad({weight})) {
    Tensor idx = indices.detach();
    int64_t rows = weight.shape()[0];
    DType wt = weight.dtype();
    autograd::record("embedding", {weight}, {out}, [idx, rows, wt](const std::vector<Tensor>& g) {
      Tensor dw = dispatch::call1<OpId::embedding_backward>({g[0], idx}, {.num_rows = rows});
      return std::vector<Tensor>{dw.dtype() == wt ? dw : dw.to(wt)};
    });
  }
  return out;
}

Tensor cat(const std::vector<Tensor>& tensors_in, int64_t dim_in) {
  ZENITH_CHECK(!tensors_in.empty(), "[cat] expected at least one tensor");
  std::vector<Tensor> tensors;
  for (size_t i = 0; i < tensors_in.size(); ++i) {
    ZENITH_CHECK(tensors_in[i].defined(), "[cat] tensor ", i, " is undefined");
    tensors.push_back(plain(tensors_in[i]));
  }
  // The reference: the first tensor that is not a legacy empty [0].
  size_t ref = 0;
  for (size_t i = 0; i < tensors.size(); ++i)
    if (!(tensors[i].dim() == 1 && tensors[i].numel() == 0)) {
      ref = i;
      break;
    }
  const Tensor& r = tensors[ref];
  ZENITH_CHECK(r.dim() > 0, "[cat] zero-dimensional tensor ", ref, " cannot be concatenated");
  int64_t dim = wrap_dim(dim_in, r.dim(), "cat");
  Shape out_shape = r.shape();
  out_shape[size_t(dim)] = 0;
  DType dtype = r.dtype();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (skipped_by_cat(t, r.dim())) continue;
    bool ok = t.dim() == r.dim();
    for (int64_t d = 0; ok && d < r.dim(); ++d)
      ok = d == dim || t.shape()[size_t(d)] == r.shape()[size_t(d)];
    ZENITH_CHECK(ok, "[cat] sizes must match except in dim ", dim, ": tensor ", ref, " is ",
                 shape_str(r.shape()), ", tensor ", i, " is ", shape_str(t.shape()));
    ZENITH_CHECK(t.device() == r.device(), "[cat] tensor ", i, " is on ", t.device().str(),
                 ", tensor ", ref, " on ", r.device().str());
    out_shape[size_t(dim)] += t.shape()[size_t(dim)];
    dtype = promote_types(dtype, t.dtype());
  }
  Tensor out =
      dispatch::call1<OpId::cat>(tensors, {.dim = dim, .dtype = dtype, .out_shape = out_shape});
  if (autograd::needs_grad(tensors)) {
    std::vector<int64_t> sizes;
    std::vector<DType> dtypes;
    for (auto& t : tensors) {
      sizes.push_back(skipped_by_cat(t, r.dim()) ? -1 : t.shape()[size_t(dim)]);
      dtypes.push_back(t.dtype());
    }
    autograd::record("cat", tensors, {out}, [sizes, dtypes, dim](const std::vector<Tensor>& g) {
      std::vector<Tensor> grads;
      int64_t offset = 0;
      for (size_t i = 0; i < sizes.size(); ++i) {
        if (sizes[i] < 0) {
          grads.push_back(Tensor::zeros({0}, dtypes[i]));
          continue;
        }
        grads.push_back(g[0].narrow(dim, offset, sizes[i]).to(dtypes[i]));
        offset += sizes[i];
      }
      return grads;
    });
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim_in) {
  ZENITH_CHECK(!tensors.empty(), "[stack] expected at least one tensor");
  ZENITH_CHECK(tensors[0].defined(), "[stack] tensor 0 is undefined");
  const Shape& shape = tensors[0].shape();
  int64_t dim = wrap_dim(dim_in, int64_t(shape.size()) + 1, "stack");
  std::vector<Tensor> parts;
  for (size_t i = 0; i < tensors.size(); ++i) {
    ZENITH_CHECK(tensors[i].defined(), "[stack] tensor ", i, " is undefined");
    ZENITH_CHECK(tensors[i].shape() == shape,
                 "[stack] all tensors must have one shape: tensor 0 "
                 "is ",
                 shape_str(shape), ", tensor ", i, " is ", shape_str(tensors[i].shape()));
    parts.push_back(tensors[i].unsqueeze(dim));
  }
  return cat(parts, dim);
}

Tensor index_select(const Tensor& x_in, int64_t dim_in, const Tensor& index) {
  ZENITH_CHECK(x_in.defined(), "[index_select] undefined input");
  check_index_dtype(index, "index_select");
  Tensor x = plain(x_in);
  ZENITH_CHECK(index.dim() <= 1, "[index_select] index must be 0-d or 1-d, got shape ",
               shape_str(index.shape()), " for input ", shape_str(x.shape()));
  int64_t dim = wrap_dim(dim_in, x.dim(), "index_select");
  // A gather whose index is the 1-d index broadcast along every other dim.
  Shape out_shape = x.shape(), view_shape(x.shape().size(), 1);
  if (x.dim() > 0) {
    out_shape[size_t(dim)] = index.numel();
    view_shape[size_t(dim)] = index.numel();
  }
  ZENITH_CHECK(x.dim() > 0 || index.numel() == 1,
               "[index_select] a 0-d input takes one index, "
               "got index of shape ",
               shape_str(index.shape()));
  Tensor idx = plain(index).reshape(view_shape).expand(out_shape);
  Tensor out = dispatch::call1<OpId::gather>({x, idx}, {.dim = dim, .index_select = true});
  if (autograd::needs_grad({x})) {
    Shape in_shape = x.shape();
    autograd::record("index_select", {x}, {out},
                     [idx, dim, in_shape](const std::vector<Tensor>& g) {
                       return std::vector<Tensor>{scatter_add_into(g[0], idx, dim, in_shape)};
                     });
  }
  return out;
}

Tensor gather(const Tensor& x_in, int64_t dim_in, const Tensor& index) {
  ZENITH_CHECK(x_in.defined(), "[gather] undefined input");
  check_index_dtype(index, "gather");
  Tensor x = plain(x_in);
  int64_t dim = wrap_dim(dim_in, x.dim(), "gather");
  bool ok = index.dim() == x.dim();
  for (int64_t d = 0; ok && d < x.dim(); ++d)
    ok = d == dim || index.shape()[size_t(d)] <= x.shape()[size_t(d)];
  ZENITH_CHECK(ok, "[gather] index of shape ", shape_str(index.shape()),
               " does not fit input of shape ", shape_str(x.shape()), " outside dim ", dim);
  Tensor idx = plain(index);
  Tensor out = dispatch::call1<OpId::gather>({x, idx}, {.dim = dim});
  if (autograd::needs_grad({x})) {
    Shape in_shape = x.shape();
    Tensor id = idx.detach();
    autograd::record("gather", {x}, {out}, [id, dim, in_shape](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{scatter_add_into(g[0], id, dim, in_shape)};
    });
  }
  return out;
}

}  // namespace zenith::ops
