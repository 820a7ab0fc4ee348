// The AVX-512 row kernel of the decode GEMV (gemv_kernels.h): 32 weights per step (one cache
// line of float16 or bfloat16) in two FMA chains per row of A, the tail by masked loads.
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

template <typename L, int M>
void rows_typed(const GemvArgs& p, int64_t j0, int64_t j1) {
  const auto* b = static_cast<const typename L::W*>(p.b);
  float s[M];
  for (int64_t j = j0; j < j1; ++j) {
    row_dot<L, M>(p.a, p.k, b + j * p.ldb, s);
    for (int i = 0; i < M; ++i) {
      float* out = p.c + i * p.ldc + j;
      *out = p.alpha * s[i] + (p.beta == 0.f ? 0.f : p.beta * *out);
    }
  }
}

template <typename L>
void rows_m(const GemvArgs& p, int64_t j0, int64_t j1) {
  switch (p.m) {
    case 1:
      return rows_typed<L, 1>(p, j0, j1);
    case 2:
      return rows_typed<L, 2>(p, j0, j1);
    case 3:
      return rows_typed<L, 3>(p, j0, j1);
    default:
      return rows_typed<L, 4>(p, j0, j1);
  }
}

}  // namespace

void gemv_rows_avx512(const GemvArgs& p, int64_t j0, int64_t j1) {
  switch (p.b_dtype) {
    case DType::f32:
      return rows_m<Load16F32>(p, j0, j1);
    case DType::bf16:
      return rows_m<Load16BF16>(p, j0, j1);
    default:
      return rows_m<Load16F16>(p, j0, j1);
  }
}

}  // namespace zenith::cpu

#pragma GCC pop_options
