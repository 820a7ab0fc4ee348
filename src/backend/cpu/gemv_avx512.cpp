// The AVX-512 row kernel of the decode GEMV (gemv_kernels.h): 64 weights per step in four
// independent FMA chains per row of A, so four loads of the weight row are in flight (two chains
// streamed slower on the AVX-512 EPYC: docs/performance.md); the tail by masked loads. The
// order of the sums does not depend on how many rows A has (batch invariance). The row loop over
// B is gemv_rows.inc, shared with the AVX2 kernel.
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
  constexpr int kChains = 4;
  __m512 acc[M][kChains];
  for (int i = 0; i < M; ++i)
    for (int c = 0; c < kChains; ++c) acc[i][c] = _mm512_setzero_ps();
  int64_t e = 0;
  for (; e + 16 * kChains <= k; e += 16 * kChains) {
    __m512 wv[kChains];
    for (int c = 0; c < kChains; ++c) wv[c] = L::load(w + e + 16 * c, kAll);
    for (int i = 0; i < M; ++i)
      for (int c = 0; c < kChains; ++c)
        acc[i][c] = _mm512_fmadd_ps(_mm512_loadu_ps(a + i * k + e + 16 * c), wv[c], acc[i][c]);
  }
  for (int c = 0; e < k; e += 16, ++c) {
    const int64_t left = k - e;
    const __mmask16 mask = left >= 16 ? kAll : __mmask16((1u << left) - 1);
    const __m512 w0 = L::load(w + e, mask);
    for (int i = 0; i < M; ++i)
      acc[i][c] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, a + i * k + e), w0, acc[i][c]);
  }
  for (int i = 0; i < M; ++i)
    out[i] = _mm512_reduce_add_ps(
        _mm512_add_ps(_mm512_add_ps(acc[i][0], acc[i][1]), _mm512_add_ps(acc[i][2], acc[i][3])));
}

#include "backend/cpu/gemv_rows.inc"

}  // namespace

void gemv_rows_avx512(const GemvArgs& p, int64_t j0, int64_t j1) {
  gemv_rows<Load16F32, Load16BF16, Load16F16>(p, j0, j1);
}

}  // namespace zenith::cpu

#pragma GCC pop_options
