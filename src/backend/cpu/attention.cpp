// Fused scaled dot-product attention (the ops of src/ops/attention.cpp), FlashAttention-2 on the
// CPU: per block of query rows the keys stream by in blocks, with a running row max and sum (an
// online softmax), so no [T, S] matrix exists; the backward recomputes each block's
// probabilities from the saved logsumexp. Block products run on single-threaded sgemm inside
// one OpenMP region; the softmax parts in 512-bit vectors where the CPU has AVX-512.
// B batch, Hq query heads, Hkv kv heads, G = Hq / Hkv, T queries, S keys, D head dim, Dv value
// dim. The G T query rows sharing a kv head are processed together (row r = g T + t), so a
// grouped-query model reads each key block once per group, and a decode step (T = 1) still
// fills a block with its G heads.
#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/cpu/gemm.h"
#include "backend/cpu/loops.h"
#include "backend/cpu/math_simd.h"
#include "backend/cpu/onednn_layout.h"
#include "core/dispatch.h"

namespace zenith::cpu {
namespace {

constexpr int64_t kRowBlock = 64;   // query rows per block
constexpr int64_t kKeyBlock = 128;  // keys per block

// C = alpha op(A) op(B) + beta C, row-major, on the calling thread (oneDNN's sgemm runs
// sequentially inside a parallel region; float64 is for tests and runs the whole op serially).
void block_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  dnnl_status_t st =
      dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  ZENITH_CHECK(st == dnnl_success, "[attention] dnnl_sgemm failed with status ", int(st));
}
void block_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
                int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              blasint(m), blasint(n), blasint(k), alpha, a, blasint(lda), b, blasint(ldb), beta, c,
              blasint(ldc));
}

// e^x for x <= 0, as every exponent here is (a score minus its row's running max or
// logsumexp, an old max minus a new one): simd::exp_nonpositive, bit for bit simd::exp there
// without its overflow tests.
template <typename T>
ZENITH_SIMD_INLINE T exp_of(T x) {
  if constexpr (std::is_same_v<T, float>)
    return simd::exp_nonpositive(x);
  else
    return std::exp(x);
}

template <typename T>
constexpr T kNegInf = -std::numeric_limits<T>::infinity();

// A [B, H, rows, cols] operand: element (b, h, i, j) at b s0 + h s1 + i s2 + j (broadcast dims
// have stride 0).
struct Operand {
  void* data = nullptr;
  int64_t s0 = 0, s1 = 0, s2 = 0;
  template <typename T>
  T* row(int64_t b, int64_t h, int64_t i) const {
    return static_cast<T*>(data) + b * s0 + h * s1 + i * s2;
  }
};

// t with unit stride along its last dim and a row stride a gemm accepts as leading dimension.
Tensor gemm_ready(const Tensor& t) {
  const bool unit = t.strides().back() == 1 || t.shape().back() == 1;
  const bool rows = t.size(-2) > 1 || t.strides()[size_t(t.dim() - 2)] >= t.size(-1);
  return unit && rows ? t : t.contiguous();
}

Operand operand(const Tensor& t) {
  if (!t.defined()) return {};
  const Shape& st = t.strides();
  return {t.raw_data(), st[0], st[1], st[2]};
}

// The problem: sizes, scale, masks, and where the row r = g T + t of kv head j lives.
struct Geometry {
  int64_t batch, hq, hkv, groups, t, s, d, dv, rows;
  bool causal;
  double scale;
  const bool* pad = nullptr;  // [B, S] contiguous, true = attend
  Operand mask;               // additive [B, Hq, T, S] (broadcast strides), or none

  Geometry(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionAttrs& a)
      : batch(q.size(0)),
        hq(q.size(1)),
        hkv(k.size(1)),
        groups(q.size(1) / k.size(1)),
        t(q.size(2)),
        s(k.size(2)),
        d(q.size(3)),
        dv(v.size(3)),
        rows(groups * q.size(2)),
        causal(a.causal),
        scale(a.scale) {}

  int64_t head(int64_t kv, int64_t r) const { return kv * groups + r / t; }
  // Multiply-adds of the forward (QK^T and PV, no causal discount).
  int64_t work() const { return batch * hq * t * s * (d + dv); }
  // The last key row r of any block may see (-1: none).
  int64_t last_key(int64_t r) const { return causal ? std::min(s - 1, r % t + s - t) : s - 1; }
  // The keys a block of rows [r0, r1) needs: [0, end).
  int64_t key_end(int64_t r0, int64_t r1) const {
    if (!causal) return s;
    int64_t end = 0;
    // The largest t in the block: the last row, unless the block crosses into the next head.
    if (r1 - r0 >= t || (r0 / t) != ((r1 - 1) / t))
      end = s;
    else
      end = last_key(r1 - 1) + 1;
    return std::max<int64_t>(0, std::min(end, s));
  }
  // Whether every row of [r0, r1) sees every key of [j0, j1) before the padding and additive
  // masks: then the block needs no causal masking.
  bool causal_free(int64_t r0, int64_t r1, int64_t j1) const {
    if (!causal) return true;
    int64_t min_last = s;
    if (r1 - r0 >= t || (r0 / t) != ((r1 - 1) / t))
      min_last = s - t;  // a block holding t = 0 of some head
    else
      min_last = last_key(r0);
    return j1 - 1 <= min_last;
  }
};

// Scores of rows [r0, r0 + nq) against keys [j0, j0 + nk) of (b, kv), in place in sc
// [nq, ldsc]: the additive mask added, masked keys -inf.
template <typename T>
void mask_block(const Geometry& g, int64_t b, int64_t kv, int64_t r0, int64_t nq, int64_t j0,
                int64_t nk, T* sc, int64_t ldsc) {
  const bool* pad = g.pad ? g.pad + b * g.s + j0 : nullptr;
  const bool causal = !g.causal_free(r0, r0 + nq, j0 + nk);
  for (int64_t i = 0; i < nq; ++i) {
    T* row = sc + i * ldsc;
    const int64_t r = r0 + i;
    if (g.mask.data) {
      const T* m = g.mask.row<T>(b, g.head(kv, r), r % g.t) + j0;
#pragma omp simd
      for (int64_t j = 0; j < nk; ++j) row[j] += m[j];
    }
    if (pad)
      for (int64_t j = 0; j < nk; ++j)
        if (!pad[j]) row[j] = kNegInf<T>;
    if (causal) {
      const int64_t last = g.last_key(r);
      for (int64_t j = std::max<int64_t>(0, last + 1 - j0); j < nk; ++j) row[j] = kNegInf<T>;
    }
  }
}

// The keys of a block of nk from j0 that row r's exps run over: in a block the causal mask cuts,
// those up to the row's last visible key rounded up to whole 16-wide vectors (the scores past
// it are -inf, mask_block's, whose exps are 0: no scalar tail loop), else all nk.
inline int64_t visible(const Geometry& g, int64_t r, int64_t j0, int64_t nk, bool diagonal) {
  if (!diagonal) return nk;
  const int64_t seen = std::clamp<int64_t>(g.last_key(r) + 1 - j0, 0, nk);
  return std::min(nk, (seen + 15) / 16 * 16);
}

// The online softmax over a block's scores sc [nq, kKeyBlock] (rows [r0, r0 + nq), keys [j0, j0 +
// nk)): each row's running max m and sum l move on, its scores become exp(s - m) and its
// accumulated output acc [nq, Dv] is rescaled to the new max.
template <typename T>
ZENITH_SIMD_INLINE void softmax_rows(const Geometry& g, int64_t r0, int64_t nq, int64_t j0,
                                     int64_t nk, bool diagonal, T* sc, T* m, T* l, T* acc) {
  const int64_t dv = g.dv;
  for (int64_t i = 0; i < nq; ++i) {
    T* row = sc + i * kKeyBlock;
    const int64_t vis = visible(g, r0 + i, j0, nk, diagonal);
    const T mx = vis > 0 ? simd::row_max(row, vis) : kNegInf<T>;
    const T m_new = std::max(m[i], mx);
    if (m_new == kNegInf<T>) {  // nothing visible yet: p = 0
      std::fill(row, row + nk, T(0));
      continue;
    }
    // What came before, rescaled: exp(m - m_new), 0 for nothing, 1 where the max stays (the
    // values exp gives there; its scalar latency skipped).
    const T alpha = m[i] == m_new ? T(1) : m[i] == kNegInf<T> ? T(0) : exp_of(m[i] - m_new);
    T sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < vis; ++j) {
      const T p = exp_of(row[j] - m_new);
      row[j] = p;
      sum += p;
    }
    std::fill(row + vis, row + nk, T(0));
    l[i] = l[i] * alpha + sum;
    m[i] = m_new;
    if (alpha != T(1)) {
      T* a = acc + i * dv;
#pragma omp simd
      for (int64_t e = 0; e < dv; ++e) a[e] *= alpha;
    }
  }
}

// The backward's probabilities of a block, P = exp(S - lse) in place over its scores p [nq,
// kKeyBlock] (masked and empty rows give 0).
template <typename T>
ZENITH_SIMD_INLINE void probs_rows(const Geometry& g, int64_t r0, int64_t nq, int64_t j0,
                                   int64_t nk, bool diagonal, T* p, const T* lse) {
  for (int64_t i = 0; i < nq; ++i) {
    T* row = p + i * kKeyBlock;
    const T l = lse[r0 + i];
    const int64_t vis = visible(g, r0 + i, j0, nk, diagonal);
#pragma omp simd
    for (int64_t j = 0; j < vis; ++j) row[j] = exp_of(row[j] - l);
    std::fill(row + vis, row + nk, T(0));
  }
}

// dS = P (dP - Di) in place over dP [nq, kKeyBlock].
template <typename T>
ZENITH_SIMD_INLINE void ds_rows(int64_t nq, int64_t nk, T* dp, const T* p, const T* di) {
  for (int64_t i = 0; i < nq; ++i) {
    T* ds = dp + i * kKeyBlock;
    const T* pr = p + i * kKeyBlock;
    const T d = di[i];
#pragma omp simd
    for (int64_t j = 0; j < nk; ++j) ds[j] = pr[j] * (ds[j] - d);
  }
}

// The same in 512-bit vectors where the CPU has AVX-512 (the build targets x86-64-v3).
#define ZENITH_AVX512 \
  __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,prefer-vector-width=512")))
ZENITH_AVX512 void softmax_rows_avx512(const Geometry& g, int64_t r0, int64_t nq, int64_t j0,
                                       int64_t nk, bool diagonal, float* sc, float* m, float* l,
                                       float* acc) {
  softmax_rows(g, r0, nq, j0, nk, diagonal, sc, m, l, acc);
}
ZENITH_AVX512 void probs_rows_avx512(const Geometry& g, int64_t r0, int64_t nq, int64_t j0,
                                     int64_t nk, bool diagonal, float* p, const float* lse) {
  probs_rows(g, r0, nq, j0, nk, diagonal, p, lse);
}
ZENITH_AVX512 void ds_rows_avx512(int64_t nq, int64_t nk, float* dp, const float* p,
                                  const float* di) {
  ds_rows(nq, nk, dp, p, di);
}
#undef ZENITH_AVX512

template <typename T>
void softmax_block(const Geometry& g, int64_t r0, int64_t nq, int64_t j0, int64_t nk, bool diagonal,
                   T* sc, T* m, T* l, T* acc) {
  if constexpr (std::is_same_v<T, float>)
    if (onednn_has_avx512()) return softmax_rows_avx512(g, r0, nq, j0, nk, diagonal, sc, m, l, acc);
  softmax_rows(g, r0, nq, j0, nk, diagonal, sc, m, l, acc);
}
template <typename T>
void probs_block(const Geometry& g, int64_t r0, int64_t nq, int64_t j0, int64_t nk, bool diagonal,
                 T* p, const T* lse) {
  if constexpr (std::is_same_v<T, float>)
    if (onednn_has_avx512()) return probs_rows_avx512(g, r0, nq, j0, nk, diagonal, p, lse);
  probs_rows(g, r0, nq, j0, nk, diagonal, p, lse);
}
template <typename T>
void ds_block(int64_t nq, int64_t nk, T* dp, const T* p, const T* di) {
  if constexpr (std::is_same_v<T, float>)
    if (onednn_has_avx512()) return ds_rows_avx512(nq, nk, dp, p, di);
  ds_rows(nq, nk, dp, p, di);
}

// Per-thread scratch of the forward.
template <typename T>
struct ForwardScratch {
  std::vector<T> qs, sc, acc, m, l;
  ForwardScratch(const Geometry& g)
      : qs(size_t(kRowBlock * g.d)),
        sc(size_t(kRowBlock * kKeyBlock)),
        acc(size_t(kRowBlock * g.dv)),
        m(size_t(kRowBlock)),
        l(size_t(kRowBlock)) {}
};

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
    block_gemm(false, true, nq, nk, d, T(1), w.qs.data(), d, kbase + j0 * k.s2, k.s2, T(0), sc,
               kKeyBlock);
    mask_block(g, b, kv, r0, nq, j0, nk, sc, kKeyBlock);
    const bool diagonal = !g.causal_free(r0, r0 + nq, j0 + nk);
    softmax_block(g, r0, nq, j0, nk, diagonal, sc, w.m.data(), w.l.data(), w.acc.data());
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

// Multiply-adds below which a call runs on one thread: a decode step's attention (one query
// row per head, ~1e5 multiply-adds, ~20 us) costs less than a fork-join, whose barrier on a
// loaded machine can wait a whole time slice for a descheduled thread.
constexpr int64_t kParallelWork = int64_t(1) << 20;

// Runs f(task) for tasks [0, n), in parallel for float32 when the call's `work` (multiply-adds)
// is worth it (dynamic: causal blocks differ in work), serially for float64 (the test
// reference; OpenBLAS is not called from many threads).
template <typename T, typename Setup, typename F>
void for_tasks(int64_t n, int64_t work, Setup&& setup, F&& f) {
  if constexpr (std::is_same_v<T, float>) {
    if (n > 1 && work >= kParallelWork && omp_get_max_threads() > 1 && !omp_in_parallel()) {
#pragma omp parallel
      {
        auto scratch = setup();
#pragma omp for schedule(dynamic, 1)
        for (int64_t i = 0; i < n; ++i) f(i, scratch);
      }
      return;
    }
  }
  // On this thread alone, its block sgemms too: outside a parallel region oneDNN may fork a
  // team for each tiny product (it does at head dim 64: a 110m decode step, 12 heads of [1, 64]
  // against 256 keys, 230 -> 29 us on 2 cores).
  SingleThreadScope one_thread;
  auto scratch = setup();
  for (int64_t i = 0; i < n; ++i) f(i, scratch);
}

Tensor float_mask(const Tensor& m, const Geometry& g) {
  if (!m.defined()) return m;
  return gemm_ready(m.expand({g.batch, g.hq, g.t, g.s}));
}

// attention(q, k, v, key_padding_mask?, attn_mask?) -> {out [B, Hq, T, Dv] (stored [B, T, Hq,
// Dv], so out.transpose(1, 2) is contiguous), lse [B, Hq, T]}
std::vector<Tensor> attention_kernel(const std::vector<Tensor>& in, const AttentionAttrs& a) {
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
        g.batch * g.hkv * blocks, g.work(), [&] { return ForwardScratch<T>(g); },
        [&](int64_t task, ForwardScratch<T>& w) {
          const int64_t blk = task % blocks, kv = (task / blocks) % g.hkv,
                        b = task / (blocks * g.hkv);
          const int64_t r0 = blk * kRowBlock;
          forward_block<T>(g, oq, ok, ov, oo, plse, b, kv, r0, std::min(kRowBlock, g.rows - r0), w);
        });
  });
  return {out, lse};
}

// ---- backward

// Per-task scratch: the group's rows packed (Qs = Q scale, dO, lse, Di = rowsum(dO O)), one
// block of probabilities and of their gradient, and one key block's dK, dV.
template <typename T>
struct BackwardScratch {
  std::vector<T> qs, dout, lse, di, p, dp, dk, dv;
  BackwardScratch(const Geometry& g)
      : qs(size_t(g.rows * g.d)),
        dout(size_t(g.rows * g.dv)),
        lse(size_t(g.rows)),
        di(size_t(g.rows)),
        p(size_t(kRowBlock * kKeyBlock)),
        dp(size_t(kRowBlock * kKeyBlock)),
        dk(size_t(kKeyBlock * g.d)),
        dv(size_t(kKeyBlock * g.dv)) {}
};

struct BackwardArgs {
  Operand dout, q, k, v, out;
  const void* lse;
  void* dq;    // [B, Hq, T, D] contiguous, or per-chunk partials [chunks][B Hkv rows D]
  Operand dk;  // [B, Hkv, S, D]: contiguous, or k's layout (below)
  Operand dv;  // [B, Hkv, S, Dv]: contiguous, or v's layout
};

// The gradients from keys [k0, k1) of (b, kv): dK and dV of those keys, and their share of dQ
// added to dq_rows [rows, D] (zeroed by the caller).
template <typename T>
void backward_keys(const Geometry& g, const BackwardArgs& x, int64_t b, int64_t kv, int64_t k0,
                   int64_t k1, T* dq_rows, BackwardScratch<T>& w) {
  const int64_t d = g.d, dv = g.dv, rows = g.rows;
  const T scale = T(g.scale);
  const T* lse = static_cast<const T*>(x.lse);
  for (int64_t r = 0; r < rows; ++r) {  // pack the group's rows
    const int64_t h = g.head(kv, r), t = r % g.t;
    const T* qr = x.q.row<T>(b, h, t);
    const T* dor = x.dout.row<T>(b, h, t);
    const T* orow = x.out.row<T>(b, h, t);
    T* qs = w.qs.data() + r * d;
    T* dst = w.dout.data() + r * dv;
#pragma omp simd
    for (int64_t e = 0; e < d; ++e) qs[e] = qr[e] * scale;
    T di = 0;
#pragma omp simd reduction(+ : di)
    for (int64_t e = 0; e < dv; ++e) {
      dst[e] = dor[e];
      di += dor[e] * orow[e];
    }
    w.di[size_t(r)] = di;
    w.lse[size_t(r)] = lse[(b * g.hq + h) * g.t + t];
  }
  const T* kbase = x.k.row<T>(b, kv, 0);
  const T* vbase = x.v.row<T>(b, kv, 0);
  for (int64_t j0 = k0; j0 < k1; j0 += kKeyBlock) {
    const int64_t nk = std::min(kKeyBlock, k1 - j0);
    const T* kb = kbase + j0 * x.k.s2;
    const T* vb = vbase + j0 * x.v.s2;
    std::fill(w.dk.begin(), w.dk.begin() + nk * d, T(0));
    std::fill(w.dv.begin(), w.dv.begin() + nk * dv, T(0));
    for (int64_t r0 = 0; r0 < rows; r0 += kRowBlock) {
      const int64_t nq = std::min(kRowBlock, rows - r0);
      if (g.key_end(r0, r0 + nq) <= j0) continue;  // causal: no row here sees these keys
      T* p = w.p.data();
      T* dp = w.dp.data();
      block_gemm(false, true, nq, nk, d, T(1), w.qs.data() + r0 * d, d, kb, x.k.s2, T(0), p,
                 kKeyBlock);
      mask_block(g, b, kv, r0, nq, j0, nk, p, kKeyBlock);
      const bool diagonal = !g.causal_free(r0, r0 + nq, j0 + nk);
      probs_block(g, r0, nq, j0, nk, diagonal, p, w.lse.data());
      // dV += P^T dO; dP = dO V^T
      block_gemm(true, false, nk, dv, nq, T(1), p, kKeyBlock, w.dout.data() + r0 * dv, dv, T(1),
                 w.dv.data(), dv);
      block_gemm(false, true, nq, nk, dv, T(1), w.dout.data() + r0 * dv, dv, vb, x.v.s2, T(0), dp,
                 kKeyBlock);
      ds_block(nq, nk, dp, p, w.di.data() + r0);  // dS = P (dP - Di), into dp
      // dQ += dS K scale; dK += dS^T Q scale (Qs holds Q scale)
      block_gemm(false, false, nq, d, nk, scale, dp, kKeyBlock, kb, x.k.s2, T(1), dq_rows + r0 * d,
                 d);
      block_gemm(true, false, nk, d, nq, T(1), dp, kKeyBlock, w.qs.data() + r0 * d, d, T(1),
                 w.dk.data(), d);
    }
    for (int64_t j = 0; j < nk; ++j) {
      std::copy_n(w.dk.data() + j * d, d, x.dk.row<T>(b, kv, j0 + j));
      std::copy_n(w.dv.data() + j * dv, dv, x.dv.row<T>(b, kv, j0 + j));
    }
  }
}

// The gradient of keys or values t [B, H, S, D]: laid out as t is where t views a [B, S, H, D]
// buffer (the projection's output split into heads, as LLaMA's v), so that autograd's transpose
// back and reshape into [B, S, H D] need no copy (PyTorch's rule: a gradient takes its input's
// strides); otherwise contiguous.
Tensor like_keys(const Tensor& t) {
  const Shape& st = t.strides();
  const int64_t b = t.size(0), h = t.size(1), s = t.size(2), d = t.size(3);
  if (h > 1 && s > 1 && st[3] == 1 && st[1] == d && st[2] == h * d && st[0] == s * h * d)
    return Tensor::empty({b, s, h, d}, t.dtype(), t.device()).transpose(1, 2);
  return Tensor::empty({b, h, s, d}, t.dtype(), t.device());
}

// attention_backward(dout, q, k, v, out, lse, key_padding_mask?, attn_mask?) -> {dq, dk, dv}.
// Tasks are (b, kv head, key chunk): each owns its keys' dK and dV; dQ is written by the only
// chunk of its (b, kv), or summed from per-chunk partials when keys are split to feed every
// thread (few heads, long sequences).
std::vector<Tensor> attention_backward_kernel(const std::vector<Tensor>& in,
                                              const AttentionAttrs& a) {
  Tensor q = gemm_ready(in[1]), k = gemm_ready(in[2]), v = gemm_ready(in[3]);
  Geometry g(q, k, v, a);
  Tensor dout = gemm_ready(in[0]);
  Tensor out = gemm_ready(in[4]), lse = in[5].contiguous();
  Tensor pad = in[6].defined() ? in[6].contiguous() : Tensor();
  Tensor mask = float_mask(in[7], g);
  if (pad.defined()) g.pad = pad.data<bool>();
  if (mask.defined()) g.mask = operand(mask);
  Tensor dq = Tensor::empty({g.batch, g.hq, g.t, g.d}, q.dtype(), q.device());
  Tensor dk = like_keys(k), dv = like_keys(v);
  const int64_t heads = g.batch * g.hkv;
  const int64_t key_blocks = (g.s + kKeyBlock - 1) / kKeyBlock;
  const bool parallel = q.dtype() == DType::f32;
  const int64_t chunks = parallel ? std::clamp<int64_t>((omp_get_max_threads() + heads - 1) / heads,
                                                        1, std::max<int64_t>(key_blocks, 1))
                                  : 1;
  // dQ partials [chunks][B, Hkv, rows, D] when keys are split, else dq's rows directly.
  Tensor partial = chunks > 1 ? Tensor::zeros({chunks, heads, g.rows, g.d}, q.dtype()) : Tensor();
  BackwardArgs args{operand(dout),  operand(q), operand(k),  operand(v), operand(out),
                    lse.raw_data(), nullptr,    operand(dk), operand(dv)};
  visit_float(q.dtype(), "attention_backward", [&](auto tag) {
    using T = decltype(tag);
    T* pdq = dq.data<T>();
    T* ppart = chunks > 1 ? partial.data<T>() : nullptr;
    for_tasks<T>(
        heads * chunks, 2 * g.work(), [&] { return BackwardScratch<T>(g); },
        [&](int64_t task, BackwardScratch<T>& w) {
          const int64_t c = task % chunks, head = task / chunks;
          const int64_t b = head / g.hkv, kv = head % g.hkv;
          const int64_t k0 = key_blocks * c / chunks * kKeyBlock;
          const int64_t k1 = std::min(g.s, key_blocks * (c + 1) / chunks * kKeyBlock);
          // The rows of (b, kv) are heads kv G .. kv G + G - 1 of batch b: contiguous in dq.
          T* acc = ppart ? ppart + (c * heads + head) * g.rows * g.d : pdq + head * g.rows * g.d;
          if (!ppart) std::fill(acc, acc + g.rows * g.d, T(0));
          backward_keys<T>(g, args, b, kv, k0, k1, acc, w);
        });
    if (ppart) {
      const int64_t n = heads * g.rows * g.d;
      parallel_for(n, kGrain, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          T s = 0;
          for (int64_t c = 0; c < chunks; ++c) s += ppart[c * n + i];
          pdq[i] = s;
        }
      });
    }
  });
  return {dq, dk, dv};
}

ZENITH_REGISTER_KERNEL(attention, CPU, attention_kernel);
ZENITH_REGISTER_KERNEL(attention_backward, CPU, attention_backward_kernel);

}  // namespace
}  // namespace zenith::cpu
