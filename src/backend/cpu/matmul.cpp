// matmul and linear kernels on top of gemm(): strided operands pass as transpose flags when one
// of their two matrix dims is unit-stride, so transposed views (gradients) are never copied.
// Products with a bfloat16/float16 operand (16-bit weights, float32 activations) run gemm_lowp
// in float32; their result is float32, or the 16-bit dtype when both operands have it (float32
// again with a float32 bias). Two bfloat16 operands take bfloat16 arithmetic where the CPU has it
// (gemm_bf16.cpp), oneDNN writing the bfloat16 or float32 result itself, bias included.
#include <algorithm>

#include "backend/cpu/gemm.h"
#include "backend/cpu/gemm_rowwise.h"
#include "backend/cpu/loops.h"
#include "core/batch_invariant.h"
#include "core/dispatch.h"
#include "zenith/cpu_features.h"

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

// Element offsets of batch item i in two operands with batch strides sa and sb.
std::pair<int64_t, int64_t> batch_offsets(int64_t i, const Shape& batch, const Shape& sa,
                                          const Shape& sb) {
  int64_t oa = 0, ob = 0, r = i;
  for (int64_t d = int64_t(batch.size()) - 1; d >= 0; --d) {
    int64_t idx = r % batch[size_t(d)];
    r /= batch[size_t(d)];
    oa += idx * sa[size_t(d)];
    ob += idx * sb[size_t(d)];
  }
  return {oa, ob};
}

bool is_low(DType t) { return t == DType::bf16 || t == DType::f16; }
// A product gemm_lowp computes: a 16-bit operand with a float32 or 16-bit one.
bool lowp_product(DType a, DType b) { return is_low(a) || is_low(b); }
// The float32 result of such a product in the dtype the op returns (PyTorch's promotion).
Tensor in_product_dtype(const Tensor& out, DType a, DType b) {
  DType t = promote_types(a, b);
  return t == DType::f32 ? out : out.to(t);
}
// Element `offset` of t's data, untyped.
const void* element(const Tensor& t, int64_t offset) {
  return static_cast<const char*>(t.raw_data()) + offset * int64_t(itemsize(t.dtype()));
}
// Two bfloat16 operands with more rows than a decode step: the bfloat16 result is written by
// gemm_bf16_rounded, with no float32 result converted after it.
bool bf16_product(DType a, DType b, int64_t rows) {
  return a == DType::bf16 && b == DType::bf16 && rows > kGemvMaxRows && bf16_arithmetic();
}

// matmul(a [..., n, k], b [..., k, m]) -> [batch..., n, m], both at least 2-d, float32/float64
// of one dtype, or a product with a 16-bit operand.
std::vector<Tensor> matmul_kernel(const std::vector<Tensor>& in, const NoAttrs&) {
  const Tensor& a = in[0];
  const Tensor& b = in[1];
  const int64_t n = a.size(-2), k = a.size(-1), m = b.size(-1);
  Shape batch = batch_shape(a, b);
  Shape out_shape = batch;
  out_shape.push_back(n);
  out_shape.push_back(m);
  MatrixArg ma = matrix_arg(a), mb = matrix_arg(b);
  Shape sa = batch_strides(ma.t, batch), sb = batch_strides(mb.t, batch);
  const int64_t count = shape_numel(batch);
  if (bf16_product(a.dtype(), b.dtype(), n)) {
    Tensor out = Tensor::empty(out_shape, DType::bf16);
    bool done = true;
    for (int64_t i = 0; i < count && done; ++i) {
      auto [oa, ob] = batch_offsets(i, batch, sa, sb);
      done = gemm_bf16_rounded(ma.trans, mb.trans, n, m, k, element(ma.t, oa), ma.ld,
                               element(mb.t, ob), mb.ld, out.data<BFloat16>() + i * n * m, m);
    }
    if (done) return {out};
  }
  if (lowp_product(a.dtype(), b.dtype())) {
    Tensor out = Tensor::empty(out_shape, DType::f32);
    float* po = out.data<float>();
    for (int64_t i = 0; i < count; ++i) {
      auto [oa, ob] = batch_offsets(i, batch, sa, sb);
      gemm_lowp(ma.trans, mb.trans, n, m, k, 1.f, element(ma.t, oa), a.dtype(), ma.ld,
                element(mb.t, ob), b.dtype(), mb.ld, 0.f, po + i * n * m, m);
    }
    return {in_product_dtype(out, a.dtype(), b.dtype())};
  }
  Tensor out = Tensor::empty(out_shape, a.dtype());
  visit_float(a.dtype(), "matmul", [&](auto tag) {
    using T = decltype(tag);
    const T* pa = ma.t.template data<T>();
    const T* pb = mb.t.template data<T>();
    T* po = out.data<T>();
    auto one = [&](int64_t i) {
      auto [oa, ob] = batch_offsets(i, batch, sa, sb);
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

// matmul_add(a [n, k], b [k, m], c [.., m]) -> c + a b in c's shape, float32/float64 of one
// dtype: c copied into the result (nothing to copy where graph mode's memory plan put the result
// over c), then the product accumulated onto it by the gemm (beta = 1), so the sum needs no pass
// of its own. It rounds as the gemm does, not as add(c, matmul(a, b)) (within 1e-6 relative).
std::vector<Tensor> matmul_add_kernel(const std::vector<Tensor>& in, const NoAttrs&) {
  ZENITH_CHECK(in.size() == 3, "[matmul_add] expected 3 inputs, got ", in.size());
  const Tensor &a = in[0], &b = in[1];
  const Tensor c = in[2].contiguous();
  ZENITH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0) && c.dim() >= 1 &&
                   c.numel() == a.size(0) * b.size(1) && c.size(-1) == b.size(1) &&
                   a.dtype() == b.dtype() && c.dtype() == a.dtype(),
               "[matmul_add] a ", shape_str(a.shape()), " ", dtype_name(a.dtype()), ", b ",
               shape_str(b.shape()), " ", dtype_name(b.dtype()), " and c ", shape_str(c.shape()),
               " ", dtype_name(c.dtype()), ": expected [n, k], [k, m] and n m elements ending in m",
               ", one dtype");
  const int64_t n = a.size(0), k = a.size(1), m = b.size(1);
  Tensor out = Tensor::empty(c.shape(), c.dtype(), c.device());
  MatrixArg ma = matrix_arg(a), mb = matrix_arg(b);
  if (out.raw_data() != c.raw_data()) out.copy_(c);
  visit_float(a.dtype(), "matmul_add", [&](auto tag) {
    using T = decltype(tag);
    gemm(ma.trans, mb.trans, n, m, k, T(1), ma.t.template data<T>(), ma.ld, mb.t.template data<T>(),
         mb.ld, T(1), out.data<T>(), m);
  });
  return {out};
}

// Starts the `rows` rows [outs] of a float32 result as the bias (float32 or 16-bit) for a gemm
// that accumulates onto them; returns that gemm's beta (0: no bias).
float start_with_bias(const Tensor& bias, float* po, int64_t rows, int64_t outs) {
  if (!bias.defined()) return 0.f;
  Tensor bc = bias.contiguous();
  to_float(bc.raw_data(), bc.dtype(), po, outs);
  for (int64_t r = 1; r < rows; ++r) std::copy(po, po + outs, po + r * outs);
  return 1.f;
}

// linear(x [M, in], weight [out, in], bias [out]?) -> x weight^T + bias [M, out]; a 16-bit
// weight (or input, or bias) computes in float32.
std::vector<Tensor> linear_kernel(const std::vector<Tensor>& in, const NoAttrs&) {
  const Tensor& x = in[0];
  const Tensor& w = in[1];
  const Tensor& bias = in[2];
  if (core::batch_invariant())  // the LLM engine: each row reduced in a batch-free order
    if (Tensor y = linear_rowwise(x, w, bias); y.defined()) return {y};
  const int64_t rows = x.size(0), features = x.size(1), outs = w.size(0);
  MatrixArg mx = matrix_arg(x), mw = matrix_arg(w);
  // bfloat16 x and weight with a float32 bias: the float32 sums plus the bias, not rounded.
  const bool f32_result =
      bias.defined() && bias.dtype() == DType::f32 && is_low(x.dtype()) && x.dtype() == w.dtype();
  if (f32_result && bf16_product(x.dtype(), w.dtype(), rows)) {
    Tensor out = Tensor::empty({rows, outs}, DType::f32);
    Tensor bc = bias.contiguous();
    if (gemm_bf16_biased(mx.trans, !mw.trans, rows, outs, features, mx.t.raw_data(), mx.ld,
                         mw.t.raw_data(), mw.ld, bc.data<float>(), out.data<float>(), outs))
      return {out};
  }
  if (!bias.defined() && bf16_product(x.dtype(), w.dtype(), rows)) {
    Tensor out = Tensor::empty({rows, outs}, DType::bf16);
    if (gemm_bf16_rounded(mx.trans, !mw.trans, rows, outs, features, mx.t.raw_data(), mx.ld,
                          mw.t.raw_data(), mw.ld, out.raw_data(), outs))
      return {out};
  }
  if (lowp_product(x.dtype(), w.dtype()) || (bias.defined() && is_low(bias.dtype()))) {
    Tensor out = Tensor::empty({rows, outs}, DType::f32);
    float* po = out.data<float>();
    const float beta = start_with_bias(bias, po, rows, outs);
    gemm_lowp(mx.trans, !mw.trans, rows, outs, features, 1.f, mx.t.raw_data(), x.dtype(), mx.ld,
              mw.t.raw_data(), w.dtype(), mw.ld, beta, po, outs);
    return {f32_result ? out : in_product_dtype(out, x.dtype(), w.dtype())};
  }
  Tensor out = Tensor::empty({rows, outs}, x.dtype());
  // A decode step (a few float32 rows, weight rows contiguous): the bandwidth-bound GEMV.
  if (x.dtype() == DType::f32 && rows <= kGemvMaxRows && !mw.trans && !mx.trans &&
      (rows == 1 || mx.ld == features)) {
    float* po = out.data<float>();
    const float beta = start_with_bias(bias, po, rows, outs);
    gemv(rows, outs, features, 1.f, mx.t.data<float>(), mw.t.raw_data(), DType::f32, mw.ld, beta,
         po, outs);
    return {out};
  }
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
ZENITH_REGISTER_KERNEL(matmul_add, CPU, matmul_add_kernel);
ZENITH_REGISTER_KERNEL(linear, CPU, linear_kernel);

}  // namespace
}  // namespace zenith::cpu
