// Fused scaled dot-product attention (the ops of src/ops/attention.cpp), FlashAttention-2 on the
// CPU: per block of query rows the keys stream by in blocks, with a running row max and sum (an
// online softmax), so no [T, S] matrix exists; the backward recomputes each block's
// probabilities from the saved logsumexp. Block products run on single-threaded sgemm inside
// one OpenMP region; the softmax parts in 512-bit vectors where the CPU has AVX-512.
// B batch, Hq query heads, Hkv kv heads, G = Hq / Hkv, T queries, S keys, D head dim, Dv value
// dim. The G T query rows sharing a kv head are processed together (row r = g T + t), so a
// grouped-query model reads each key block once per group, and a decode step (T = 1) still
// fills a block with its G heads.
// The blocks these run on are in attention_blocks.{h,cpp}, the backward in attention_backward.cpp.
#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/cpu/attention_blocks.h"
#include "backend/cpu/loops.h"
#include "core/dispatch.h"

namespace zenith::cpu::flash {
namespace {

// Per-thread scratch of the forward.
template <typename T>
struct ForwardScratch {
  std::vector<T> qs, sc, acc, m, l;
  // Sized for the rows a block has (one or a few in a decode step).
  ForwardScratch(const Geometry& g, int64_t rows)
      : qs(size_t(rows * g.d)),
        sc(size_t(rows * kKeyBlock)),
        acc(size_t(rows * g.dv)),
        m(size_t(rows)),
        l(size_t(rows)) {}
};

// A decode step's block has a row or two: sgemm's call and packing cost more than its
// products, so they run as plain dot products and row updates here.
constexpr int64_t kDirectRows = 2;

// sc[i, j] = a[i, :] . b[j, :] for nq rows of a and nk rows of b, length d.
template <typename T>
void direct_scores(int64_t nq, int64_t nk, int64_t d, const T* a, int64_t lda, const T* b,
                   int64_t ldb, T* sc, int64_t ldc) {
  for (int64_t i = 0; i < nq; ++i)
    for (int64_t j = 0; j < nk; ++j) {
      const T* x = a + i * lda;
      const T* y = b + j * ldb;
      T sum = 0;
#pragma omp simd reduction(+ : sum)
      for (int64_t e = 0; e < d; ++e) sum += x[e] * y[e];
      sc[i * ldc + j] = sum;
    }
}

// acc[i, :] += sum over j of p[i, j] v[j, :].
template <typename T>
void direct_weighted_sum(int64_t nq, int64_t dv, int64_t nk, const T* p, int64_t ldp, const T* v,
                         int64_t ldv, T* acc, int64_t ldacc) {
  for (int64_t i = 0; i < nq; ++i) {
    T* dst = acc + i * ldacc;
    for (int64_t j = 0; j < nk; ++j) {
      const T w = p[i * ldp + j];
      const T* src = v + j * ldv;
#pragma omp simd
      for (int64_t e = 0; e < dv; ++e) dst[e] += w * src[e];
    }
  }
}

// One block of rows [r0, r0 + nq) of (b, kv): out rows and their logsumexp.
template <typename T>
void forward_block(const Geometry& g, const Operand& q, const Operand& k, const Operand& v,
                   const Operand& out, T* lse, int64_t b, int64_t kv, int64_t r0, int64_t nq,
                   ForwardScratch<T>& w) {
  const int64_t d = g.d, dv = g.dv;
  const T scale = T(g.scale);
  for (int64_t i = 0; i < nq; ++i) {  // Qs = Q scale, packed
    const int64_t r = r0 + i;
    const T* src = q.row<T>(b, g.head(kv, r), r % g.t);
    T* dst = w.qs.data() + i * d;
#pragma omp simd
    for (int64_t e = 0; e < d; ++e) dst[e] = src[e] * scale;
  }
  std::fill(w.acc.begin(), w.acc.begin() + nq * dv, T(0));
  std::fill(w.m.begin(), w.m.begin() + nq, kNegInf<T>);
  std::fill(w.l.begin(), w.l.begin() + nq, T(0));
  const int64_t end = g.key_end(r0, r0 + nq);
  const T* kbase = k.row<T>(b, kv, 0);
  const T* vbase = v.row<T>(b, kv, 0);
  for (int64_t j0 = 0; j0 < end; j0 += kKeyBlock) {
    const int64_t nk = std::min(kKeyBlock, end - j0);
    T* sc = w.sc.data();
    if (nq <= kDirectRows)
      direct_scores(nq, nk, d, w.qs.data(), d, kbase + j0 * k.s2, k.s2, sc, kKeyBlock);
    else
      block_gemm(false, true, nq, nk, d, T(1), w.qs.data(), d, kbase + j0 * k.s2, k.s2, T(0), sc,
                 kKeyBlock);
    mask_block(g, b, kv, r0, nq, j0, nk, sc, kKeyBlock);
    const bool diagonal = !g.causal_free(r0, r0 + nq, j0 + nk);
    softmax_block(g, r0, nq, j0, nk, diagonal, sc, w.m.data(), w.l.data(), w.acc.data());
    if (nq <= kDirectRows)
      direct_weighted_sum(nq, dv, nk, sc, kKeyBlock, vbase + j0 * v.s2, v.s2, w.acc.data(), dv);
    else
      block_gemm(false, false, nq, dv, nk, T(1), sc, kKeyBlock, vbase + j0 * v.s2, v.s2, T(1),
                 w.acc.data(), dv);
  }
  for (int64_t i = 0; i < nq; ++i) {
    const int64_t r = r0 + i, h = g.head(kv, r), t = r % g.t;
    const T l = w.l[size_t(i)];
    const T inv = l > T(0) ? T(1) / l : T(0);
    T* dst = out.row<T>(b, h, t);
    const T* a = w.acc.data() + i * dv;
#pragma omp simd
    for (int64_t e = 0; e < dv; ++e) dst[e] = a[e] * inv;
    lse[(b * g.hq + h) * g.t + t] =
        l > T(0) ? w.m[size_t(i)] + std::log(l) : std::numeric_limits<T>::infinity();
  }
}
// attention(q, k, v, key_padding_mask?, attn_mask?) -> {out [B, Hq, T, Dv] (stored [B, T, Hq,
// Dv], so out.transpose(1, 2) is contiguous), lse [B, Hq, T]}
std::vector<Tensor> attention_kernel(const std::vector<Tensor>& in, const AttentionAttrs& a) {
  if (in[0].dtype() == DType::bf16) return attention_bf16(in, a);
  Tensor q = gemm_ready(in[0]), k = gemm_ready(in[1]), v = gemm_ready(in[2]);
  Geometry g(q, k, v, a);
  Tensor pad = in[3].defined() ? in[3].contiguous() : Tensor();
  Tensor mask = float_mask(in[4], g);
  if (pad.defined()) g.pad = pad.data<bool>();
  if (mask.defined()) g.mask = operand(mask);
  Tensor out = Tensor::empty({g.batch, g.t, g.hq, g.dv}, q.dtype(), q.device()).transpose(1, 2);
  Tensor lse = Tensor::empty({g.batch, g.hq, g.t}, q.dtype(), q.device());
  const Operand oq = operand(q), ok = operand(k), ov = operand(v), oo = operand(out);
  const int64_t blocks = (g.rows + kRowBlock - 1) / kRowBlock;
  visit_float(q.dtype(), "attention", [&](auto tag) {
    using T = decltype(tag);
    T* plse = lse.data<T>();
    for_tasks<T>(
        g.batch * g.hkv * blocks, g.work(),
        [&] { return ForwardScratch<T>(g, std::min(kRowBlock, g.rows)); },
        [&](int64_t task, ForwardScratch<T>& w) {
          const int64_t blk = task % blocks, kv = (task / blocks) % g.hkv,
                        b = task / (blocks * g.hkv);
          const int64_t r0 = blk * kRowBlock;
          forward_block<T>(g, oq, ok, ov, oo, plse, b, kv, r0, std::min(kRowBlock, g.rows - r0), w);
        });
  });
  return {out, lse};
}
ZENITH_REGISTER_KERNEL(attention, CPU, attention_kernel);

}  // namespace
}  // namespace zenith::cpu::flash
