// The row-wise kernel's register blocks in 512-bit vectors (gemm_rowwise.cpp picks them where
// the CPU has AVX-512): sixteen FMA lanes over K in steps of 16, the lanes summed by
// _mm512_reduce_add_ps's fixed tree, the K % 16 tail in order, then the bias. The order is the
// same for every row count, so rows stay batch-invariant on this machine.
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq")
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "backend/cpu/gemm_rowwise.h"
#include "zenith/dtype.h"

namespace zenith::cpu {
namespace {

struct Load32 {
  using W = float;
  static __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
  static float load1(float v) { return v; }
};
struct LoadB16 {
  using W = uint16_t;
  static __m512 load16(const uint16_t* p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static float load1(uint16_t v) { return bf16_to_float(v); }
};
struct LoadH16 {
  using W = uint16_t;
  static __m512 load16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static float load1(uint16_t v) { return half_to_float(v); }
};

template <typename L, int MR, int NR>
void block(const float* x, int64_t k, const typename L::W* w, const float* bias, float* y,
           int64_t ldy, int64_t j) {
  __m512 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int q = 0; q < NR; ++q) acc[i][q] = _mm512_setzero_ps();
  int64_t e = 0;
  for (; e + 16 <= k; e += 16) {
    __m512 wv[NR];
    for (int q = 0; q < NR; ++q) wv[q] = L::load16(w + (j + q) * k + e);
    for (int i = 0; i < MR; ++i) {
      const __m512 xv = _mm512_loadu_ps(x + i * k + e);
      for (int q = 0; q < NR; ++q) acc[i][q] = _mm512_fmadd_ps(xv, wv[q], acc[i][q]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int q = 0; q < NR; ++q) {
      const typename L::W* wr = w + (j + q) * k;
      float sum = _mm512_reduce_add_ps(acc[i][q]);
      for (int64_t t = e; t < k; ++t) sum = std::fma(x[i * k + t], L::load1(wr[t]), sum);
      y[i * ldy + j + q] = bias ? sum + bias[j + q] : sum;
    }
}

template <typename L, int MR>
void columns(const float* x, int64_t k, const void* wv, const float* bias, float* y, int64_t ldy,
             int64_t j0, int64_t j1) {
  const auto* w = static_cast<const typename L::W*>(wv);
  int64_t j = j0;
  for (; j + 4 <= j1; j += 4) block<L, MR, 4>(x, k, w, bias, y, ldy, j);
  for (; j < j1; ++j) block<L, MR, 1>(x, k, w, bias, y, ldy, j);
}

template <typename L>
void columns_rows(int rows, const float* x, int64_t k, const void* w, const float* bias, float* y,
                  int64_t ldy, int64_t j0, int64_t j1) {
  switch (rows) {
    case 4:
      return columns<L, 4>(x, k, w, bias, y, ldy, j0, j1);
    case 3:
      return columns<L, 3>(x, k, w, bias, y, ldy, j0, j1);
    case 2:
      return columns<L, 2>(x, k, w, bias, y, ldy, j0, j1);
    default:
      return columns<L, 1>(x, k, w, bias, y, ldy, j0, j1);
  }
}

}  // namespace

void rowwise_columns_avx512(DType w_dtype, int rows, const float* x, int64_t k, const void* w,
                            const float* bias, float* y, int64_t ldy, int64_t j0, int64_t j1) {
  switch (w_dtype) {
    case DType::f32:
      return columns_rows<Load32>(rows, x, k, w, bias, y, ldy, j0, j1);
    case DType::bf16:
      return columns_rows<LoadB16>(rows, x, k, w, bias, y, ldy, j0, j1);
    default:
      return columns_rows<LoadH16>(rows, x, k, w, bias, y, ldy, j0, j1);
  }
}

}  // namespace zenith::cpu
