// bfloat16 attention in bfloat16 arithmetic (amp O1/O2 and bf16 inference where the CPU has
// AVX512_BF16): the FlashAttention-2 blocks of attention.cpp and attention_backward.cpp with every
// product (QK^T and PV; in the backward dV = P^T dO, dP = dO V^T, dQ = dS K, dK = dS^T Q) through
// gemm_bf16 (oneDNN's bf16 matmul, float32 accumulation), and the masks, the online softmax, its
// statistics and the accumulators in float32. Q, K, V and dO are bfloat16 tensors; P and dS are
// rounded to bfloat16 where they are made, as operands of the next product. The scale multiplies
// the float32 scores (gemm_bf16 takes alpha 1), so Q is not rounded a second time. Outputs: out,
// dq, dk, dv bfloat16, lse float32. Where gemm_bf16 declines (no AVX512_BF16), the same blocks run
// in float32 arithmetic on the bfloat16 values. Shapes as in attention.cpp's legend.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/cpu/attention_blocks.h"
#include "backend/cpu/loops.h"
#include "zenith/cpu_features.h"

namespace zenith::cpu::flash {
namespace {

using Bf16 = uint16_t;

// Query rows per block: twice the float32 kernel's, as each bf16 product call
// costs more than an sgemm's and runs faster per multiply-add.
constexpr int64_t kRows = 2 * kRowBlock;

// n float32 values rounded to bfloat16 (nearest even) by vcvtneps2bf16, 16 at a time; only
// called where bf16_arithmetic() says the CPU has it.
__attribute__((target("avx512f,avx512bf16"))) void round_avx512_bf16(const float* s, Bf16* d,
                                                                     int64_t n) {
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m256bh y = _mm512_cvtneps_pbh(_mm512_loadu_ps(s + j));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + j), (__m256i)y);
  }
  for (; j < n; ++j) d[j] = float_to_bf16(s[j]);
}

void round_rows(int64_t rows, int64_t cols, const float* src, int64_t lds, Bf16* dst, int64_t ldd) {
  static const bool vector = bf16_arithmetic();
  for (int64_t i = 0; i < rows; ++i) {
    const float* s = src + i * lds;
    Bf16* d = dst + i * ldd;
    if (vector) {
      round_avx512_bf16(s, d, cols);
      continue;
    }
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) d[j] = float_to_bf16(s[j]);
  }
}

// op(A) [m, k] or its transpose, stored with row stride ld, as float32 [rows, cols] (the stored
// matrix, unchanged in layout).
std::vector<float> widened(int64_t rows, int64_t cols, const Bf16* src, int64_t ld) {
  std::vector<float> out(size_t(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) out[size_t(i * cols + j)] = bf16_to_float(src[i * ld + j]);
  return out;
}

// C [m, n] = op(A) op(B) + beta C for bfloat16 A and B: bfloat16 arithmetic where gemm_bf16
// takes it, else float32 arithmetic on the widened values.
void product(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const Bf16* a, int64_t lda,
             const Bf16* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k > 0 &&
      gemm_bf16(ta, tb, m, n, k, 1.f, a, DType::bf16, lda, b, DType::bf16, ldb, beta, c, ldc))
    return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.f ? 0.f : c[i * ldc + j];
    return;
  }
  const int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
  const std::vector<float> af = widened(ar, ac, a, lda), bf = widened(br, bc, b, ldb);
  block_gemm(ta, tb, m, n, k, 1.f, af.data(), ac, bf.data(), bc, beta, c, ldc);
}

// Scores [nq, kKeyBlock] of nq packed query rows against nk keys from kb: Q K^T scale.
void scores(const Geometry& g, int64_t nq, int64_t nk, const Bf16* qs, const Bf16* kb, int64_t ldk,
            float* sc) {
  product(false, true, nq, nk, g.d, qs, g.d, kb, ldk, 0.f, sc, kKeyBlock);
  const float scale = float(g.scale);
  for (int64_t i = 0; i < nq; ++i) {
    float* row = sc + i * kKeyBlock;
#pragma omp simd
    for (int64_t j = 0; j < nk; ++j) row[j] *= scale;
  }
}

struct ForwardScratch {
  std::vector<Bf16> qs, pb;
  std::vector<float> sc, acc, m, l;
  ForwardScratch(const Geometry& g, int64_t rows)
      : qs(size_t(rows * g.d)),
        pb(size_t(rows * kKeyBlock)),
        sc(size_t(rows * kKeyBlock)),
        acc(size_t(rows * g.dv)),
        m(size_t(rows)),
        l(size_t(rows)) {}
};

// One block of rows [r0, r0 + nq) of (b, kv): out rows and their logsumexp.
void forward_block(const Geometry& g, const Operand& q, const Operand& k, const Operand& v,
                   const Operand& out, float* lse, int64_t b, int64_t kv, int64_t r0, int64_t nq,
                   ForwardScratch& w) {
  const int64_t d = g.d, dv = g.dv;
  for (int64_t i = 0; i < nq; ++i) {
    const int64_t r = r0 + i;
    std::copy_n(q.row<Bf16>(b, g.head(kv, r), r % g.t), d, w.qs.data() + i * d);
  }
  std::fill(w.acc.begin(), w.acc.begin() + nq * dv, 0.f);
  std::fill(w.m.begin(), w.m.begin() + nq, kNegInf<float>);
  std::fill(w.l.begin(), w.l.begin() + nq, 0.f);
  const int64_t end = g.key_end(r0, r0 + nq);
  const Bf16* kbase = k.row<Bf16>(b, kv, 0);
  const Bf16* vbase = v.row<Bf16>(b, kv, 0);
  for (int64_t j0 = 0; j0 < end; j0 += kKeyBlock) {
    const int64_t nk = std::min(kKeyBlock, end - j0);
    float* sc = w.sc.data();
    scores(g, nq, nk, w.qs.data(), kbase + j0 * k.s2, k.s2, sc);
    mask_block(g, b, kv, r0, nq, j0, nk, sc, kKeyBlock);
    const bool diagonal = !g.causal_free(r0, r0 + nq, j0 + nk);
    softmax_block(g, r0, nq, j0, nk, diagonal, sc, w.m.data(), w.l.data(), w.acc.data());
    round_rows(nq, nk, sc, kKeyBlock, w.pb.data(), kKeyBlock);
    product(false, false, nq, dv, nk, w.pb.data(), kKeyBlock, vbase + j0 * v.s2, v.s2, 1.f,
            w.acc.data(), dv);
  }
  for (int64_t i = 0; i < nq; ++i) {
    const int64_t r = r0 + i, h = g.head(kv, r), t = r % g.t;
    const float l = w.l[size_t(i)];
    const float inv = l > 0.f ? 1.f / l : 0.f;
    float* a = w.acc.data() + i * dv;
#pragma omp simd
    for (int64_t e = 0; e < dv; ++e) a[e] *= inv;
    round_rows(1, dv, a, dv, out.row<Bf16>(b, h, t), dv);
    lse[(b * g.hq + h) * g.t + t] =
        l > 0.f ? w.m[size_t(i)] + std::log(l) : std::numeric_limits<float>::infinity();
  }
}

Tensor as_bf16(const Tensor& t) {
  return gemm_ready(t.dtype() == DType::bf16 ? t : t.to(DType::bf16));
}
Tensor as_f32(const Tensor& t) {
  if (!t.defined()) return t;
  return t.dtype() == DType::f32 ? t : t.to(DType::f32);
}

// The problem of in = (q, k, v, ...) with its masks: key_padding_mask at in[pad], the additive
// mask (as float32) at in[pad + 1]; `keep` holds the tensors the geometry points into.
Geometry geometry(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& pad_in,
                  const Tensor& mask_in, const AttentionAttrs& a, std::vector<Tensor>& keep) {
  Geometry g(q, k, v, a);
  Tensor pad = pad_in.defined() ? pad_in.contiguous() : Tensor();
  Tensor mask = float_mask(as_f32(mask_in), g);
  if (pad.defined()) g.pad = pad.data<bool>();
  if (mask.defined()) g.mask = operand(mask);
  keep = {pad, mask};
  return g;
}

}  // namespace

std::vector<Tensor> attention_bf16(const std::vector<Tensor>& in, const AttentionAttrs& a) {
  Tensor q = as_bf16(in[0]), k = as_bf16(in[1]), v = as_bf16(in[2]);
  std::vector<Tensor> keep;
  const Geometry g = geometry(q, k, v, in[3], in[4], a, keep);
  Tensor out = Tensor::empty({g.batch, g.t, g.hq, g.dv}, DType::bf16, q.device()).transpose(1, 2);
  Tensor lse = Tensor::empty({g.batch, g.hq, g.t}, DType::f32, q.device());
  const Operand oq = operand(q), ok = operand(k), ov = operand(v), oo = operand(out);
  const int64_t blocks = (g.rows + kRows - 1) / kRows;
  float* plse = lse.data<float>();
  for_tasks<float>(
      g.batch * g.hkv * blocks, g.work(),
      [&] { return ForwardScratch(g, std::min(kRows, g.rows)); },
      [&](int64_t task, ForwardScratch& w) {
        const int64_t blk = task % blocks, kv = (task / blocks) % g.hkv,
                      b = task / (blocks * g.hkv);
        const int64_t r0 = blk * kRows;
        forward_block(g, oq, ok, ov, oo, plse, b, kv, r0, std::min(kRows, g.rows - r0), w);
      });
  return {out, lse};
}

namespace {

// Per-task scratch of the backward: the group's rows packed (Q, dO, lse, Di = rowsum(dO O)), a
// block of probabilities and of their gradient (float32, and rounded for the products), one key
// block's dK / scale and dV.
struct BackwardScratch {
  std::vector<Bf16> q, dout, pb, dsb;
  std::vector<float> lse, di, p, dp, dk, dv;
  explicit BackwardScratch(const Geometry& g)
      : q(size_t(g.rows * g.d)),
        dout(size_t(g.rows * g.dv)),
        pb(size_t(kRows * kKeyBlock)),
        dsb(size_t(kRows * kKeyBlock)),
        lse(size_t(g.rows)),
        di(size_t(g.rows)),
        p(size_t(kRows * kKeyBlock)),
        dp(size_t(kRows * kKeyBlock)),
        dk(size_t(kKeyBlock * g.d)),
        dv(size_t(kKeyBlock * g.dv)) {}
};

struct BackwardArgs {
  Operand dout, q, k, v, out, dk, dv;
  const float* lse;
};

// The gradients from keys [k0, k1) of (b, kv): dK and dV of those keys, and their share of
// dQ / scale added to dq_rows [rows, D] (float32, zeroed by the caller).
void backward_keys(const Geometry& g, const BackwardArgs& x, int64_t b, int64_t kv, int64_t k0,
                   int64_t k1, float* dq_rows, BackwardScratch& w) {
  const int64_t d = g.d, dv = g.dv, rows = g.rows;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t h = g.head(kv, r), t = r % g.t;
    const Bf16* dor = x.dout.row<Bf16>(b, h, t);
    const Bf16* orow = x.out.row<Bf16>(b, h, t);
    std::copy_n(x.q.row<Bf16>(b, h, t), d, w.q.data() + r * d);
    std::copy_n(dor, dv, w.dout.data() + r * dv);
    float di = 0;
#pragma omp simd reduction(+ : di)
    for (int64_t e = 0; e < dv; ++e) di += bf16_to_float(dor[e]) * bf16_to_float(orow[e]);
    w.di[size_t(r)] = di;
    w.lse[size_t(r)] = x.lse[(b * g.hq + h) * g.t + t];
  }
  const float scale = float(g.scale);
  const Bf16* kbase = x.k.row<Bf16>(b, kv, 0);
  const Bf16* vbase = x.v.row<Bf16>(b, kv, 0);
  for (int64_t j0 = k0; j0 < k1; j0 += kKeyBlock) {
    const int64_t nk = std::min(kKeyBlock, k1 - j0);
    const Bf16* kb = kbase + j0 * x.k.s2;
    const Bf16* vb = vbase + j0 * x.v.s2;
    std::fill(w.dk.begin(), w.dk.begin() + nk * d, 0.f);
    std::fill(w.dv.begin(), w.dv.begin() + nk * dv, 0.f);
    for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
      const int64_t nq = std::min(kRows, rows - r0);
      if (g.key_end(r0, r0 + nq) <= j0) continue;  // causal: no row here sees these keys
      float* p = w.p.data();
      float* dp = w.dp.data();
      const Bf16* dob = w.dout.data() + r0 * dv;
      const Bf16* qb = w.q.data() + r0 * d;
      scores(g, nq, nk, qb, kb, x.k.s2, p);
      mask_block(g, b, kv, r0, nq, j0, nk, p, kKeyBlock);
      const bool diagonal = !g.causal_free(r0, r0 + nq, j0 + nk);
      probs_block(g, r0, nq, j0, nk, diagonal, p, w.lse.data());
      round_rows(nq, nk, p, kKeyBlock, w.pb.data(), kKeyBlock);
      // dV += P^T dO; dP = dO V^T
      product(true, false, nk, dv, nq, w.pb.data(), kKeyBlock, dob, dv, 1.f, w.dv.data(), dv);
      product(false, true, nq, nk, dv, dob, dv, vb, x.v.s2, 0.f, dp, kKeyBlock);
      ds_block(nq, nk, dp, p, w.di.data() + r0);  // dS = P (dP - Di), into dp
      round_rows(nq, nk, dp, kKeyBlock, w.dsb.data(), kKeyBlock);
      // dQ / scale += dS K; dK / scale += dS^T Q
      product(false, false, nq, d, nk, w.dsb.data(), kKeyBlock, kb, x.k.s2, 1.f, dq_rows + r0 * d,
              d);
      product(true, false, nk, d, nq, w.dsb.data(), kKeyBlock, qb, d, 1.f, w.dk.data(), d);
    }
    for (int64_t j = 0; j < nk; ++j) {
      float* dks = w.dk.data() + j * d;
#pragma omp simd
      for (int64_t e = 0; e < d; ++e) dks[e] *= scale;
      round_rows(1, d, dks, d, x.dk.row<Bf16>(b, kv, j0 + j), d);
      round_rows(1, dv, w.dv.data() + j * dv, dv, x.dv.row<Bf16>(b, kv, j0 + j), dv);
    }
  }
}

}  // namespace

std::vector<Tensor> attention_backward_bf16(const std::vector<Tensor>& in,
                                            const AttentionAttrs& a) {
  Tensor q = as_bf16(in[1]), k = as_bf16(in[2]), v = as_bf16(in[3]);
  std::vector<Tensor> keep;
  const Geometry g = geometry(q, k, v, in[6], in[7], a, keep);
  Tensor dout = as_bf16(in[0]), out = as_bf16(in[4]), lse = as_f32(in[5]).contiguous();
  Tensor dq = Tensor::empty({g.batch, g.hq, g.t, g.d}, DType::bf16, q.device());
  Tensor dk = like_keys(k), dv = like_keys(v);
  const int64_t heads = g.batch * g.hkv;
  const int64_t key_blocks = (g.s + kKeyBlock - 1) / kKeyBlock;
  const int64_t chunks = std::clamp<int64_t>((omp_get_max_threads() + heads - 1) / heads, 1,
                                             std::max<int64_t>(key_blocks, 1));
  // dQ / scale in float32: per-chunk partials [chunks][B, Hkv, rows, D], summed at the end.
  Tensor partial = Tensor::zeros({chunks, heads, g.rows, g.d}, DType::f32);
  const BackwardArgs args{operand(dout), operand(q),  operand(k),  operand(v),
                          operand(out),  operand(dk), operand(dv), lse.data<float>()};
  float* ppart = partial.data<float>();
  for_tasks<float>(
      heads * chunks, 2 * g.work(), [&] { return BackwardScratch(g); },
      [&](int64_t task, BackwardScratch& w) {
        const int64_t c = task % chunks, head = task / chunks;
        const int64_t b = head / g.hkv, kv = head % g.hkv;
        const int64_t k0 = key_blocks * c / chunks * kKeyBlock;
        const int64_t k1 = std::min(g.s, key_blocks * (c + 1) / chunks * kKeyBlock);
        backward_keys(g, args, b, kv, k0, k1, ppart + (c * heads + head) * g.rows * g.d, w);
      });
  // The rows of (b, kv) are heads kv G .. kv G + G - 1 of batch b: contiguous in dq.
  Bf16* pdq = static_cast<Bf16*>(dq.raw_data());
  const int64_t n = heads * g.rows * g.d;
  const float scale = float(g.scale);
  parallel_for(n, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float s = 0;
      for (int64_t c = 0; c < chunks; ++c) s += ppart[c * n + i];
      pdq[i] = float_to_bf16(s * scale);
    }
  });
  return {dq, dk, dv};
}

}  // namespace zenith::cpu::flash
