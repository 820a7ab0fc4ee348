// matmul and linear kernels on top of gemm(): strided operands pass as transpose flags when one
// of their two matrix dims is unit-stride, so transposed views (gradients) are never copied.
#include <algorithm>

#include "backend/cpu/gemm.h"
#include "backend/cpu/loops.h"
#include "core/dispatch.h"

namespace zenith::cpu {
namespace {

// How a matrix view [rows, cols] (last two dims of a tensor) is handed to gemm.
struct MatrixArg {
  Tensor t;    // the tensor whose data is read (x itself, or a contiguous copy)
  bool trans;  // stored transposed: element (i, j) at i + j * ld
  int64_t ld;
};

MatrixArg matrix_arg(const Tensor& x) {
  const int64_t nd = x.dim();
  const int64_t rows = x.shape()[size_t(nd - 2)], cols = x.shape()[size_t(nd - 1)];
  const int64_t rs = x.strides()[size_t(nd - 2)], cs = x.strides()[size_t(nd - 1)];
  if ((cs == 1 || cols == 1) && (rows == 1 || rs >= cols)) return {x, false, rows == 1 ? cols : rs};
  if ((rs == 1 || rows == 1) && (cols == 1 || cs >= rows)) return {x, true, cols == 1 ? rows : cs};
  Tensor c = x.contiguous();
  return {c, false, cols};
}

// Broadcast batch shape of a [..., n, k] and b [..., k, m].
Shape batch_shape(const Tensor& a, const Tensor& b) {
  Shape ba(a.shape().begin(), a.shape().end() - 2), bb(b.shape().begin(), b.shape().end() - 2);
  return broadcast_shapes(ba, bb, "matmul");
}

// Batch strides of `t` broadcast to `batch` (ignoring its two matrix dims).
Shape batch_strides(const Tensor& t, const Shape& batch) {
  const int64_t nb = int64_t(batch.size()), tb = t.dim() - 2;
  Shape st(size_t(nb), 0);
  for (int64_t i = 0; i < tb; ++i) {
    int64_t d = nb - tb + i;
    st[size_t(d)] = t.shape()[size_t(i)] == 1 ? 0 : t.strides()[size_t(i)];
  }
  return st;
}

// matmul(a [..., n, k], b [..., k, m]) -> [batch..., n, m], both at least 2-d, same float dtype.
std::vector<Tensor> matmul_kernel(const std::vector<Tensor>& in, const NoAttrs&) {
  const Tensor& a = in[0];
  const Tensor& b = in[1];
  const int64_t n = a.size(-2), k = a.size(-1), m = b.size(-1);
  Shape batch = batch_shape(a, b);
  Shape out_shape = batch;
  out_shape.push_back(n);
  out_shape.push_back(m);
  Tensor out = Tensor::empty(out_shape, a.dtype());
  MatrixArg ma = matrix_arg(a), mb = matrix_arg(b);
  Shape sa = batch_strides(ma.t, batch), sb = batch_strides(mb.t, batch);
  const int64_t count = shape_numel(batch);
  visit_float(a.dtype(), "matmul", [&](auto tag) {
    using T = decltype(tag);
    const T* pa = ma.t.template data<T>();
    const T* pb = mb.t.template data<T>();
    T* po = out.data<T>();
    auto one = [&](int64_t i) {
      int64_t oa = 0, ob = 0, r = i;
      for (int64_t d = int64_t(batch.size()) - 1; d >= 0; --d) {
        int64_t idx = r % batch[size_t(d)];
        r /= batch[size_t(d)];
        oa += idx * sa[size_t(d)];
        ob += idx * sb[size_t(d)];
      }
      gemm(ma.trans, mb.trans, n, m, k, T(1), pa + oa, ma.ld, pb + ob, mb.ld, T(0), po + i * n * m,
           m);
    };
    // Many small matrices: one gemm per thread; otherwise let each gemm use the pool.
    if (count > 1 && n * m * k < 64 * 64 * 64)
      parallel_for(count, 1, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) one(i);
      });
    else
      for (int64_t i = 0; i < count; ++i) one(i);
  });
  return {out};
}

// linear(x [M, in], weight [out, in], bias [out]?) -> x weight^T + bias [M, out]
std::vector<Tensor> linear_kernel(const std::vector<Tensor>& in, const NoAttrs&) {
  const Tensor& x = in[0];
  const Tensor& w = in[1];
  const Tensor& bias = in[2];
  const int64_t rows = x.size(0), features = x.size(1), outs = w.size(0);
  Tensor out = Tensor::empty({rows, outs}, x.dtype());
  MatrixArg mx = matrix_arg(x), mw = matrix_arg(w);
  visit_float(x.dtype(), "linear", [&](auto tag) {
    using T = decltype(tag);
    T* po = out.data<T>();
    T beta = T(0);
    if (bias.defined()) {  // out rows start as the bias, gemm accumulates onto them
      Tensor bc = bias.contiguous();
      const T* pb = bc.template data<T>();
      for (int64_t r = 0; r < rows; ++r) std::copy(pb, pb + outs, po + r * outs);
      beta = T(1);
    }
    // x [M, in] times w^T: w is stored [out, in], so op(w) = w^T flips its flag.
    gemm(mx.trans, !mw.trans, rows, outs, features, T(1), mx.t.template data<T>(), mx.ld,
         mw.t.template data<T>(), mw.ld, beta, po, outs);
  });
  return {out};
}

ZENITH_REGISTER_KERNEL(matmul, CPU, matmul_kernel);
ZENITH_REGISTER_KERNEL(linear, CPU, linear_kernel);

}  // namespace
}  // namespace zenith::cpu
