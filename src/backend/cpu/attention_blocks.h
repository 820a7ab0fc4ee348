// The blocks FlashAttention-2 runs on the CPU (attention.cpp: forward; attention_backward.cpp):
// the problem's geometry, block GEMMs, the masks, the online softmax and the backward's
// probabilities, and the thread split. Shapes as in attention.cpp's legend.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "backend/cpu/gemm.h"
#include "backend/cpu/math_simd.h"
#include "core/op_attrs.h"
#include "zenith/tensor.h"

namespace zenith::cpu::flash {

constexpr int64_t kRowBlock = 64;   // query rows per block
constexpr int64_t kKeyBlock = 128;  // keys per block

// C = alpha op(A) op(B) + beta C, row-major, on the calling thread (oneDNN's sgemm runs
// sequentially inside a parallel region; float64 is for tests and runs the whole op serially).
void block_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
void block_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
                int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc);

// e^x for x <= 0, as every exponent here is (a score minus its row's running max or
// logsumexp, an old max minus a new one): simd::exp_nonpositive, bit for bit simd::exp there
// without its overflow tests.
template <typename T>
ZENITH_SIMD_INLINE T exp_nonpositive_of(T x) {
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
Tensor gemm_ready(const Tensor& t);

Operand operand(const Tensor& t);

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
// accumulated output acc [nq, Dv] is rescaled to the new max; 512-bit vectors where the CPU has
// AVX-512.
template <typename T>
void softmax_block(const Geometry& g, int64_t r0, int64_t nq, int64_t j0, int64_t nk, bool diagonal,
                   T* sc, T* m, T* l, T* acc);
// The backward's probabilities of a block, P = exp(S - lse) in place over its scores p [nq,
// kKeyBlock] (masked and empty rows give 0).
template <typename T>
void probs_block(const Geometry& g, int64_t r0, int64_t nq, int64_t j0, int64_t nk, bool diagonal,
                 T* p, const T* lse);
// dS = P (dP - Di) in place over dP [nq, kKeyBlock].
template <typename T>
void ds_block(int64_t nq, int64_t nk, T* dp, const T* p, const T* di);

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
  // against 256 keys, several times slower on 2 cores).
  SingleThreadScope one_thread;
  auto scratch = setup();
  for (int64_t i = 0; i < n; ++i) f(i, scratch);
}

// An additive mask broadcast to [B, Hq, T, S] with gemm-ready strides (undefined stays so).
Tensor float_mask(const Tensor& m, const Geometry& g);

// The gradient buffer of keys or values t [B, H, S, D] (attention_backward.cpp): laid out as t is
// where t views a [B, S, H, D] buffer, otherwise contiguous.
Tensor like_keys(const Tensor& t);

// The ops on bfloat16 q, k, v (attention_bf16.cpp): products in bfloat16 arithmetic, float32
// accumulation, softmax in float32; out, dq, dk, dv bfloat16, lse float32.
std::vector<Tensor> attention_bf16(const std::vector<Tensor>& in, const AttentionAttrs& a);
std::vector<Tensor> attention_backward_bf16(const std::vector<Tensor>& in, const AttentionAttrs& a);

}  // namespace zenith::cpu::flash
