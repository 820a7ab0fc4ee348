// The blocks of the CPU FlashAttention-2 (attention_blocks.h): block GEMMs and the row loops of
// the online softmax, the backward's probabilities and dS, in 512-bit vectors where the CPU has
// AVX-512.
#include "backend/cpu/attention_blocks.h"

#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>

#include "backend/cpu/onednn_layout.h"

namespace zenith::cpu::flash {

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

namespace {

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
    const T alpha = m[i] == m_new        ? T(1)
                    : m[i] == kNegInf<T> ? T(0)
                                         : exp_nonpositive_of(m[i] - m_new);
    T sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < vis; ++j) {
      const T p = exp_nonpositive_of(row[j] - m_new);
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
    for (int64_t j = 0; j < vis; ++j) row[j] = exp_nonpositive_of(row[j] - l);
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

}  // namespace

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
template void softmax_block(const Geometry&, int64_t, int64_t, int64_t, int64_t, bool, float*,
                            float*, float*, float*);
template void softmax_block(const Geometry&, int64_t, int64_t, int64_t, int64_t, bool, double*,
                            double*, double*, double*);
template void probs_block(const Geometry&, int64_t, int64_t, int64_t, int64_t, bool, float*,
                          const float*);
template void probs_block(const Geometry&, int64_t, int64_t, int64_t, int64_t, bool, double*,
                          const double*);
template void ds_block(int64_t, int64_t, float*, const float*, const float*);
template void ds_block(int64_t, int64_t, double*, const double*, const double*);

Tensor float_mask(const Tensor& m, const Geometry& g) {
  if (!m.defined()) return m;
  return gemm_ready(m.expand({g.batch, g.hq, g.t, g.s}));
}

}  // namespace zenith::cpu::flash
