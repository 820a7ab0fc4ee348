// The decode step's product: a few activation rows against a linear layer's weight rows,
// C[m, n] = alpha A[m, k] B[n, k]^T + beta C, B float32, bfloat16 or float16. Bandwidth-bound:
// each weight is read once (2 or 4 bytes) and used m times. Blocks of rows of B go to the
// caller and helper threads by claiming (claim_pool.h), so no call waits on a descheduled
// thread.
#include <immintrin.h>

#include <algorithm>

#include "backend/cpu/claim_pool.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/lowp_load.h"
#include "zenith/error.h"

namespace zenith::cpu {
namespace {

// Weights below this many bytes run on the calling thread: ~10 us of streaming, about what
// handing work to another core costs.
constexpr int64_t kParallelBytes = int64_t(1) << 17;
// Bytes of B per claimed block: a few microseconds of streaming, so a late helper still finds
// work and the per-block claim (one atomic) stays below 1% of it.
constexpr int64_t kBlockBytes = int64_t(1) << 16;

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_hadd_ps(s, s);
  s = _mm_hadd_ps(s, s);
  return _mm_cvtss_f32(s);
}

// Rows [j, j + C) of B against the M rows of A: M x C independent FMA chains (one chain alone is
// latency-bound); M and C compile-time so the accumulators stay in registers.
template <typename L, int M, int C>
void gemv_block(int64_t j, int64_t k, float alpha, const float* a, const typename L::W* b,
                int64_t ldb, float beta, float* c, int64_t ldc) {
  __m256 acc[C][M];
  for (int q = 0; q < C; ++q)
    for (int i = 0; i < M; ++i) acc[q][i] = _mm256_setzero_ps();
  int64_t e = 0;
  for (; e + 8 <= k; e += 8) {
    __m256 av[M];
    for (int i = 0; i < M; ++i) av[i] = _mm256_loadu_ps(a + i * k + e);
    for (int q = 0; q < C; ++q) {
      const __m256 wv = L::load8(b + (j + q) * ldb + e);
      for (int i = 0; i < M; ++i) acc[q][i] = _mm256_fmadd_ps(av[i], wv, acc[q][i]);
    }
  }
  for (int q = 0; q < C; ++q) {
    const typename L::W* w = b + (j + q) * ldb;
    for (int i = 0; i < M; ++i) {
      float sum = hsum(acc[q][i]);
      for (int64_t t = e; t < k; ++t) sum += a[i * k + t] * L::load1(w[t]);
      float* out = c + i * ldc + j + q;
      *out = alpha * sum + (beta == 0.f ? 0.f : beta * *out);
    }
  }
}

// Rows of B per pass for M rows of A: as many as the 16 vector registers hold (M x C
// accumulators, M activation vectors, one weight vector). More rows per pass keep more
// cache-line misses in flight: 12 rows stream 1.3x faster than 4 at M = 1 (110M shape's
// weights, one core).
template <int M>
constexpr int kRowsPerPass = M == 1   ? 12
                             : M == 2 ? 6
                             : M == 3 ? 4
                                      : 3;

template <typename L, int M>
void gemv_rows(int64_t j0, int64_t j1, int64_t k, float alpha, const float* a,
               const typename L::W* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  constexpr int C = kRowsPerPass<M>;
  int64_t j = j0;
  for (; j + C <= j1; j += C) gemv_block<L, M, C>(j, k, alpha, a, b, ldb, beta, c, ldc);
  for (; j < j1; ++j) gemv_block<L, M, 1>(j, k, alpha, a, b, ldb, beta, c, ldc);
}

template <typename L>
void gemv_typed(int64_t m, int64_t n, int64_t k, float alpha, const float* a, const void* bv,
                int64_t ldb, float beta, float* c, int64_t ldc) {
  const auto* b = static_cast<const typename L::W*>(bv);
  auto rows = [&](int64_t j0, int64_t j1) {
    switch (m) {
      case 1:
        return gemv_rows<L, 1>(j0, j1, k, alpha, a, b, ldb, beta, c, ldc);
      case 2:
        return gemv_rows<L, 2>(j0, j1, k, alpha, a, b, ldb, beta, c, ldc);
      case 3:
        return gemv_rows<L, 3>(j0, j1, k, alpha, a, b, ldb, beta, c, ldc);
      default:
        return gemv_rows<L, 4>(j0, j1, k, alpha, a, b, ldb, beta, c, ldc);
    }
  };
  const int64_t row_bytes = k * int64_t(sizeof(typename L::W));
  if (n * row_bytes < kParallelBytes) {
    rows(0, n);
    return;
  }
  // Blocks of a multiple of 12 rows (a multiple of every kRowsPerPass), about kBlockBytes each.
  const int64_t block = std::max<int64_t>(12, kBlockBytes / row_bytes / 12 * 12);
  parallel_claim((n + block - 1) / block,
                 [&](int64_t i) { rows(i * block, std::min(n, (i + 1) * block)); });
}

}  // namespace

void gemv(int64_t m, int64_t n, int64_t k, float alpha, const float* a, const void* b,
          DType b_dtype, int64_t ldb, float beta, float* c, int64_t ldc) {
  ZENITH_CHECK(m >= 1 && m <= kGemvMaxRows, "[gemm] the GEMV takes 1 to ", kGemvMaxRows,
               " rows, got ", m);
  if (n == 0) return;
  switch (b_dtype) {
    case DType::f32:
      return gemv_typed<LoadF32>(m, n, k, alpha, a, b, ldb, beta, c, ldc);
    case DType::bf16:
      return gemv_typed<LoadBF16>(m, n, k, alpha, a, b, ldb, beta, c, ldc);
    case DType::f16:
      return gemv_typed<LoadF16>(m, n, k, alpha, a, b, ldb, beta, c, ldc);
    default:
      ZENITH_FAIL("[gemm] the GEMV reads float32, bfloat16 or float16 weights, got ",
                  dtype_name(b_dtype));
  }
}

}  // namespace zenith::cpu
