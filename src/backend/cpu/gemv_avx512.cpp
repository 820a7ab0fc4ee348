// The AVX-512 row kernel of the decode GEMV (gemv_kernels.h): 32 weights per step (one cache
// line of float16 or bfloat16) in two FMA chains per row of A, the tail by masked loads; the row
// loop over B is gemv_rows.inc, shared with the AVX2 kernel.
#include <immintrin.h>

#include "backend/cpu/gemv_kernels.h"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl")

namespace zenith::cpu {
namespace {

// Sixteen weights from p as float32; the lanes outside `mask` read nothing and are zero.
struct Load16F32 {
  using W = float;
  static __m512 load(const float* p, __mmask16 mask) { return _mm512_maskz_loadu_ps(mask, p); }
};

struct Load16BF16 {
  using W = uint16_t;
  static __m512 load(const uint16_t* p, __mmask16 mask) {
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask, p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
};

struct Load16F16 {
  using W = uint16_t;
  static __m512 load(const uint16_t* p, __mmask16 mask) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, p));
  }
};

template <typename L, int M>
void row_dot(const float* a, int64_t k, const typename L::W* w, float* out) {
  constexpr __mmask16 kAll = 0xFFFF;
  __m512 acc0[M], acc1[M];
  for (int i = 0; i < M; ++i) acc0[i] = acc1[i] = _mm512_setzero_ps();
  int64_t e = 0;
  for (; e + 32 <= k; e += 32) {
    const __m512 w0 = L::load(w + e, kAll), w1 = L::load(w + e + 16, kAll);
    for (int i = 0; i < M; ++i) {
      acc0[i] = _mm512_fmadd_ps(_mm512_loadu_ps(a + i * k + e), w0, acc0[i]);
      acc1[i] = _mm512_fmadd_ps(_mm512_loadu_ps(a + i * k + e + 16), w1, acc1[i]);
    }
  }
  for (; e < k; e += 16) {
    const int64_t left = k - e;
    const __mmask16 mask = left >= 16 ? kAll : __mmask16((1u << left) - 1);
    const __m512 w0 = L::load(w + e, mask);
    for (int i = 0; i < M; ++i)
      acc0[i] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, a + i * k + e), w0, acc0[i]);
  }
  for (int i = 0; i < M; ++i) out[i] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[i], acc1[i]));
}

#include "backend/cpu/gemv_rows.inc"

}  // namespace

void gemv_rows_avx512(const GemvArgs& p, int64_t j0, int64_t j1) {
  gemv_rows<Load16F32, Load16BF16, Load16F16>(p, j0, j1);
}

}  // namespace zenith::cpu

#pragma GCC pop_options
