// The row-wise kernel's register blocks, shared by its AVX2 build (gemm_rowwise.cpp) and its
// AVX-512 build (gemm_rowwise_avx512.cpp, whose target pragma covers this header's code there).
// V is the vector: Reg, kLanes, zero(), load(const float*), fma(a, b, c), sum(Reg) in a fixed
// tree. L loads weights of type L::W: load(p) -> V::Reg of kLanes values, load1(w) -> float.
#pragma once

#include <cmath>
#include <cstdint>

namespace zenith::cpu::rowwise {

// y[i, j + q] for rows i < MR of x [MR, k] and columns q < NR: MR x NR independent accumulators
// over K in steps of kLanes, each summed by V::sum, then the tail in order, then the bias.
template <typename V, typename L, int MR, int NR>
inline void block(const float* x, int64_t k, const typename L::W* w, const float* bias, float* y,
                  int64_t ldy, int64_t j) {
  typename V::Reg acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int q = 0; q < NR; ++q) acc[i][q] = V::zero();
  int64_t e = 0;
  for (; e + V::kLanes <= k; e += V::kLanes) {
    typename V::Reg wv[NR];
    for (int q = 0; q < NR; ++q) wv[q] = L::load(w + (j + q) * k + e);
    for (int i = 0; i < MR; ++i) {
      const typename V::Reg xv = V::load(x + i * k + e);
      for (int q = 0; q < NR; ++q) acc[i][q] = V::fma(xv, wv[q], acc[i][q]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int q = 0; q < NR; ++q) {
      const typename L::W* wr = w + (j + q) * k;
      float sum = V::sum(acc[i][q]);
      for (int64_t t = e; t < k; ++t) sum = std::fma(x[i * k + t], L::load1(wr[t]), sum);
      y[i * ldy + j + q] = bias ? sum + bias[j + q] : sum;
    }
}

template <typename V, typename L, int MR>
inline void columns(const float* x, int64_t k, const void* wv, const float* bias, float* y,
                    int64_t ldy, int64_t j0, int64_t j1) {
  const auto* w = static_cast<const typename L::W*>(wv);
  int64_t j = j0;
  for (; j + 4 <= j1; j += 4) block<V, L, MR, 4>(x, k, w, bias, y, ldy, j);
  for (; j < j1; ++j) block<V, L, MR, 1>(x, k, w, bias, y, ldy, j);
}

// y[0 .. rows, j0 .. j1) for 1 to 4 rows of x.
template <typename V, typename L>
inline void rows_columns(int rows, const float* x, int64_t k, const void* w, const float* bias,
                         float* y, int64_t ldy, int64_t j0, int64_t j1) {
  switch (rows) {
    case 4:
      return columns<V, L, 4>(x, k, w, bias, y, ldy, j0, j1);
    case 3:
      return columns<V, L, 3>(x, k, w, bias, y, ldy, j0, j1);
    case 2:
      return columns<V, L, 2>(x, k, w, bias, y, ldy, j0, j1);
    default:
      return columns<V, L, 1>(x, k, w, bias, y, ldy, j0, j1);
  }
}

}  // namespace zenith::cpu::rowwise
