// The decode step's product: a few activation rows against a linear layer's weight rows,
// C[m, n] = alpha A[m, k] B[n, k]^T + beta C, B float32, bfloat16 or float16. Bandwidth-bound:
// each weight is read once (2 or 4 bytes) and used m times. Blocks of rows of B go to the
// caller and helper threads by claiming (claim_pool.h), so no call waits on a descheduled
// thread. This file holds the dispatch and the AVX2 row kernel; gemv_avx512.cpp the AVX-512
// one (gemv_kernels.h); gemv_rows.inc the row loop both share.
#include <immintrin.h>

#include <algorithm>

#include "backend/cpu/claim_pool.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/gemv_kernels.h"
#include "backend/cpu/lowp_load.h"
#include "zenith/error.h"

namespace zenith::cpu {
namespace {

// Weights below this many bytes run on the calling thread: ~10 us of streaming, about what
// handing work to another core costs.
constexpr int64_t kParallelBytes = int64_t(1) << 17;
// Bytes of B per claimed block at one row of A: ~10 us of streaming, long enough for the
// prefetcher to ramp up on each block (64 KiB blocks made the 110M shape's two-thread decode
// 10-20% slower), short enough that a late helper still finds work. More rows of A make a
// block more arithmetic, so it holds fewer bytes.
constexpr int64_t kBlockBytes = int64_t(1) << 18;
constexpr int64_t kMinBlockBytes = int64_t(1) << 16;

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// One row w of B against the M rows of A (stride k): 16 weights per step in two independent
// FMA chains per row of A (one chain alone is bound by the FMA's latency).
template <typename L, int M>
void row_dot(const float* a, int64_t k, const typename L::W* w, float* out) {
  __m256 acc0[M], acc1[M];
  for (int i = 0; i < M; ++i) acc0[i] = acc1[i] = _mm256_setzero_ps();
  int64_t e = 0;
  for (; e + 16 <= k; e += 16) {
    const __m256 w0 = L::load8(w + e), w1 = L::load8(w + e + 8);
    for (int i = 0; i < M; ++i) {
      acc0[i] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i * k + e), w0, acc0[i]);
      acc1[i] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i * k + e + 8), w1, acc1[i]);
    }
  }
  if (e + 8 <= k) {
    const __m256 w0 = L::load8(w + e);
    for (int i = 0; i < M; ++i)
      acc0[i] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i * k + e), w0, acc0[i]);
    e += 8;
  }
  for (int i = 0; i < M; ++i) {
    float sum = hsum(_mm256_add_ps(acc0[i], acc1[i]));
    for (int64_t t = e; t < k; ++t) sum += a[i * k + t] * L::load1(w[t]);
    out[i] = sum;
  }
}

#include "backend/cpu/gemv_rows.inc"

}  // namespace

void gemv_rows_avx2(const GemvArgs& p, int64_t j0, int64_t j1) {
  gemv_rows<LoadF32, LoadBF16, LoadF16>(p, j0, j1);
}

bool gemv_isa_supported(GemvIsa isa) {
  if (isa == GemvIsa::avx2) return true;  // the build's baseline (x86-64-v3)
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl");
}

GemvIsa gemv_isa() {
  static const GemvIsa best = gemv_isa_supported(GemvIsa::avx512) ? GemvIsa::avx512 : GemvIsa::avx2;
  return best;
}

void gemv_on(GemvIsa isa, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
             const void* b, DType b_dtype, int64_t ldb, float beta, float* c, int64_t ldc) {
  ZENITH_CHECK(m >= 1 && m <= kGemvMaxRows, "[gemm] the GEMV takes 1 to ", kGemvMaxRows,
               " rows, got ", m);
  ZENITH_CHECK(b_dtype == DType::f32 || b_dtype == DType::bf16 || b_dtype == DType::f16,
               "[gemm] the GEMV reads float32, bfloat16 or float16 weights, got ",
               dtype_name(b_dtype));
  ZENITH_CHECK(gemv_isa_supported(isa), "[gemm] this CPU has no AVX-512 for the GEMV");
  if (n == 0) return;
  const GemvArgs p{m, k, alpha, a, b, b_dtype, ldb, beta, c, ldc};
  auto rows = isa == GemvIsa::avx512 ? gemv_rows_avx512 : gemv_rows_avx2;
  const int64_t row_bytes = k * int64_t(itemsize(b_dtype));
  if (n * row_bytes < kParallelBytes) {
    rows(p, 0, n);
    return;
  }
  // Blocks of whole rows, about kBlockBytes / m each, in equal parts (two blocks of 144 rows, not
  // one of 227 and one of 61).
  const int64_t block_bytes = std::max(kMinBlockBytes, kBlockBytes / m);
  const int64_t blocks = (n * row_bytes + block_bytes - 1) / block_bytes;
  const int64_t block = std::max<int64_t>(4, (n + blocks - 1) / blocks);
  parallel_claim((n + block - 1) / block,
                 [&](int64_t i) { rows(p, i * block, std::min(n, (i + 1) * block)); });
}

void gemv(int64_t m, int64_t n, int64_t k, float alpha, const float* a, const void* b,
          DType b_dtype, int64_t ldb, float beta, float* c, int64_t ldc) {
  gemv_on(gemv_isa(), m, n, k, alpha, a, b, b_dtype, ldb, beta, c, ldc);
}

}  // namespace zenith::cpu
