// CPU indexing kernels: gather (also serving index_select through a broadcast index),
// scatter_add (their gradient), embedding and its gradient, cat.
#include <atomic>
#include <cstring>

#include "backend/cpu/gemm.h"
#include "backend/cpu/loops.h"
#include "core/dispatch.h"

namespace zenith::cpu {
namespace {

Tensor as_int64(const Tensor& index) {
  return index.dtype() == DType::i64 ? index : index.to(DType::i64);
}

// Throws "[op] index v is out of bounds for dim d with size n" for the first bad entry.
void check_range(const Tensor& index, int64_t size, const char* op, int64_t dim) {
  std::atomic<bool> bad{false};
  std::atomic<int64_t> bad_value{0};
  StridedLoop<1> loop(index.shape(), {index.strides()});
  const int64_t* p = index.data<int64_t>();
  loop.run([&](const std::array<int64_t, 1>& off, int64_t n, const std::array<int64_t, 1>& st) {
    const int64_t* q = p + off[0];
    for (int64_t i = 0; i < n; ++i) {
      int64_t v = q[i * st[0]];
      if (v < 0 || v >= size) {
        if (!bad.exchange(true)) bad_value = v;
        return;
      }
    }
  });
  if (bad) {
    if (dim < 0)
      ZENITH_FAIL("[", op, "] index ", bad_value.load(), " is out of range for ", size, " rows");
    ZENITH_FAIL("[", op, "] index ", bad_value.load(), " is out of bounds for dim ", dim,
                " with size ", size);
  }
}

// Strides of t with `dim` moved last (for loops whose inner rows must run along dim).
Shape dim_last(const Shape& s, int64_t dim) {
  Shape out;
  for (size_t d = 0; d < s.size(); ++d)
    if (int64_t(d) != dim) out.push_back(s[d]);
  out.push_back(s[size_t(dim)]);
  return out;
}

// gather(x, index; dim): out[.., j, ..] = x[.., index[.., j, ..], ..] over index's shape.
// index may be strided (index_select passes a broadcast 1-d index).
std::vector<Tensor> gather_kernel(const std::vector<Tensor>& in, const GatherAttrs& attrs) {
  const Tensor& x = in[0];
  const int64_t dim = attrs.dim;
  const char* op = attrs.index_select ? "index_select" : "gather";
  Tensor index = as_int64(in[1]);
  const int64_t size = x.dim() == 0 ? 1 : x.shape()[size_t(dim)];
  check_range(index, size, op, dim);
  Tensor out = Tensor::empty(index.shape(), x.dtype(), x.device());
  if (out.numel() == 0) return {out};
  Shape x_strides = x.strides();
  int64_t dim_stride = x.dim() == 0 ? 0 : x_strides[size_t(dim)];
  if (x.dim() > 0) x_strides[size_t(dim)] = 0;
  StridedLoop<3> loop(index.shape(), {out.strides(), index.strides(), x_strides});
  const int64_t* ip = index.data<int64_t>();
  char* ob = static_cast<char*>(out.raw_data());
  const char* xb = static_cast<const char*>(x.raw_data());
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* o = reinterpret_cast<T*>(ob);
    const T* xp = reinterpret_cast<const T*>(xb);
    loop.run([&](const std::array<int64_t, 3>& off, int64_t n, const std::array<int64_t, 3>& st) {
      T* oq = o + off[0];
      const int64_t* iq = ip + off[1];
      const T* xq = xp + off[2];
      for (int64_t i = 0; i < n; ++i) oq[i * st[0]] = xq[i * st[2] + iq[i * st[1]] * dim_stride];
    });
  });
  return {out};
}

// scatter_add(src, index; dim, shape): zeros(shape) with out[.., index[.., j, ..], ..] += src.
// Loops run with dim innermost, so the rows handled in parallel never write the same element.
std::vector<Tensor> scatter_add_kernel(const std::vector<Tensor>& in,
                                       const ScatterAddAttrs& attrs) {
  const Tensor& src = in[0];
  const int64_t dim = attrs.dim;
  const Shape& shape = attrs.shape;
  Tensor index = as_int64(in[1]);
  const int64_t size = shape.empty() ? 1 : shape[size_t(dim)];
  check_range(index, size, "scatter_add", dim);
  Tensor out = Tensor::zeros(shape, src.dtype(), src.device());
  if (index.numel() == 0) return {out};
  Shape out_strides = out.strides();
  int64_t dim_stride = shape.empty() ? 0 : out_strides[size_t(dim)];
  if (!shape.empty()) out_strides[size_t(dim)] = 0;
  Shape src_strides = broadcast_strides(src, index.shape());
  const int64_t d = shape.empty() ? 0 : dim;
  Shape loop_shape = index.shape().empty() ? Shape{} : dim_last(index.shape(), d);
  StridedLoop<3> loop(loop_shape, {index.shape().empty() ? Shape{} : dim_last(out_strides, d),
                                   index.shape().empty() ? Shape{} : dim_last(index.strides(), d),
                                   index.shape().empty() ? Shape{} : dim_last(src_strides, d)});
  const int64_t* ip = index.data<int64_t>();
  visit_dtype(src.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    if constexpr (std::is_same_v<T, bool>) {
      ZENITH_FAIL("[scatter_add] not supported on bool tensors");
    } else {
      T* o = out.data<T>();
      const T* sp = src.data<T>();
      loop.run(
          [&](const std::array<int64_t, 3>& off, int64_t n, const std::array<int64_t, 3>& st) {
            T* oq = o + off[0];
            const int64_t* iq = ip + off[1];
            const T* sq = sp + off[2];
            for (int64_t i = 0; i < n; ++i) {
              T& dst = oq[i * st[0] + iq[i * st[1]] * dim_stride];
              dst = store<T>(C(load(dst)) + C(load(sq[i * st[2]])));
            }
          },
          kGrain, /*split_rows=*/false);
    }
  });
  return {out};
}

// embedding(weight [V, D], indices [..]) -> [.., D]: one row copy per index; rows of a 16-bit
// table are converted to float32 (16-bit LLaMA weights, float32 activations).
std::vector<Tensor> embedding_kernel(const std::vector<Tensor>& in, const NoAttrs&) {
  Tensor weight = in[0].contiguous();
  Tensor index = as_int64(in[1]).contiguous();
  const int64_t v = weight.shape()[0], d = weight.shape()[1];
  check_range(index, v, "embedding", -1);
  Shape out_shape = index.shape();
  out_shape.push_back(d);
  const DType wt = weight.dtype();
  const bool widen = wt == DType::bf16 || wt == DType::f16;
  Tensor out = Tensor::empty(out_shape, widen ? DType::f32 : wt, weight.device());
  const int64_t n = index.numel();
  const int64_t* ip = index.data<int64_t>();
  const size_t row_bytes = size_t(d) * itemsize(wt);
  const char* w = static_cast<const char*>(weight.raw_data());
  char* o = static_cast<char*>(out.raw_data());
  parallel_for(n, std::max<int64_t>(1, kGrain / std::max<int64_t>(d, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t i = b; i < e; ++i) {
                   const char* src = w + size_t(ip[i]) * row_bytes;
                   if (widen)
                     to_float(src, wt, out.data<float>() + i * d, d);
                   else
                     std::memcpy(o + size_t(i) * row_bytes, src, row_bytes);
                 }
               });
  return {out};
}

// embedding_backward(grad [.., D], indices [..]; num_rows) -> [V, D], rows scatter-added.
// Threads own disjoint column ranges, so repeated indices never race. embedding_backward_add
// (a third input, base [V, D] of grad's dtype) scatter-adds into a copy of base instead of zeros,
// or into base itself where graph mode's memory plan put the output over it (base dies here).
std::vector<Tensor> embedding_backward_kernel(const std::vector<Tensor>& in,
                                              const EmbeddingBackwardAttrs& attrs) {
  const int64_t v = attrs.num_rows;
  Tensor index = as_int64(in[1]).contiguous();
  const int64_t n = index.numel();
  const int64_t d = in[0].shape().back();
  Tensor grad = in[0].contiguous().reshape({n, d});
  Tensor out;
  if (in.size() > 2) {
    const Shape want = {v, d};
    ZENITH_CHECK(in[2].shape() == want && in[2].dtype() == grad.dtype(),
                 "[embedding_backward_add] base is ", shape_str(in[2].shape()), " ",
                 dtype_name(in[2].dtype()), ", expected [", v, ", ", d, "] ",
                 dtype_name(grad.dtype()));
    Tensor base = in[2].contiguous();
    out = Tensor::empty({v, d}, grad.dtype(), grad.device());
    if (out.raw_data() != base.raw_data())
      std::memcpy(out.raw_data(), base.raw_data(), size_t(v * d) * itemsize(grad.dtype()));
  } else {
    out = Tensor::zeros({v, d}, grad.dtype(), grad.device());
  }
  const int64_t* ip = index.data<int64_t>();
  visit_dtype(grad.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    if constexpr (std::is_floating_point_v<C>) {
      const T* g = grad.data<T>();
      T* o = out.data<T>();
      parallel_for(d, std::max<int64_t>(1, kGrain / std::max<int64_t>(n, 1)),
                   [&](int64_t c0, int64_t c1) {
                     for (int64_t i = 0; i < n; ++i) {
                       T* orow = o + ip[i] * d;
                       const T* grow = g + i * d;
                       if constexpr (std::is_same_v<T, C>) {
#pragma omp simd
                         for (int64_t c = c0; c < c1; ++c) orow[c] += grow[c];
                       } else {
                         for (int64_t c = c0; c < c1; ++c)
                           orow[c] = store<T>(C(load(orow[c])) + C(load(grow[c])));
                       }
                     }
                   });
    } else {
      ZENITH_FAIL("[embedding] gradient needs a floating weight");
    }
  });
  return {out};
}

// cat(tensors; dim, dtype): copies each input into its slice of the output.
std::vector<Tensor> cat_kernel(const std::vector<Tensor>& in, const CatAttrs& attrs) {
  const int64_t dim = attrs.dim;
  const DType dtype = attrs.dtype;
  const Shape& out_shape = attrs.out_shape;
  Tensor out = Tensor::empty(out_shape, dtype, in[0].device());
  int64_t offset = 0;
  for (const Tensor& t : in) {
    if (t.dim() == 1 && t.numel() == 0 && out.dim() != 1) continue;  // legacy empty [0]
    int64_t len = t.shape()[size_t(dim)];
    if (len > 0) out.narrow(dim, offset, len).copy_(t);
    offset += len;
  }
  return {out};
}

ZENITH_REGISTER_KERNEL(gather, CPU, gather_kernel);
ZENITH_REGISTER_KERNEL(scatter_add, CPU, scatter_add_kernel);
ZENITH_REGISTER_KERNEL(embedding, CPU, embedding_kernel);
ZENITH_REGISTER_KERNEL(embedding_backward, CPU, embedding_backward_kernel);
ZENITH_REGISTER_KERNEL(embedding_backward_add, CPU, embedding_backward_kernel);
ZENITH_REGISTER_KERNEL(cat, CPU, cat_kernel);

}  // namespace
}  // namespace zenith::cpu
