// The batch-invariant linear product: every output element y[m, n] is reduced in one order —
// eight FMA lanes over K in steps of 8 (lane l takes k = l mod 8, in increasing k; sixteen lanes
// where the CPU has AVX-512, gemm_rowwise_avx512.cpp), the lanes summed in a fixed tree, then the
// K % 8 tail in order, then the bias added — whatever M is, how
// rows are grouped into register blocks, and which thread computes it. Weights are tiled: a block
// of weight rows (about kTileBytes) stays in cache while every row of x passes over it.
// N out features, K in features, M rows of x.
#include "backend/cpu/gemm_rowwise.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "backend/cpu/claim_pool.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/lowp_load.h"
#include "backend/cpu/onednn_layout.h"

namespace zenith::cpu {
namespace {

// Weight bytes per tile: well inside L2, so rows of x after the first read it from cache.
constexpr int64_t kTileBytes = int64_t(1) << 17;
// Products below this many multiply-adds run on the calling thread.
constexpr int64_t kParallelMacs = int64_t(1) << 18;

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// y[i, j + q] for rows i < MR of x and columns q < NR: MR x NR independent accumulators.
template <typename L, int MR, int NR>
void block(const float* x, int64_t k, const typename L::W* w, const float* bias, float* y,
           int64_t ldy, int64_t j) {
  __m256 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int q = 0; q < NR; ++q) acc[i][q] = _mm256_setzero_ps();
  int64_t e = 0;
  for (; e + 8 <= k; e += 8) {
    __m256 wv[NR];
    for (int q = 0; q < NR; ++q) wv[q] = L::load8(w + (j + q) * k + e);
    for (int i = 0; i < MR; ++i) {
      const __m256 xv = _mm256_loadu_ps(x + i * k + e);
      for (int q = 0; q < NR; ++q) acc[i][q] = _mm256_fmadd_ps(xv, wv[q], acc[i][q]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int q = 0; q < NR; ++q) {
      const typename L::W* wr = w + (j + q) * k;
      float sum = hsum(acc[i][q]);
      for (int64_t t = e; t < k; ++t) sum = std::fma(x[i * k + t], L::load1(wr[t]), sum);
      y[i * ldy + j + q] = bias ? sum + bias[j + q] : sum;
    }
}

template <typename L, int MR>
void columns(const float* x, int64_t k, const typename L::W* w, const float* bias, float* y,
             int64_t ldy, int64_t j0, int64_t j1) {
  int64_t j = j0;
  for (; j + 4 <= j1; j += 4) block<L, MR, 4>(x, k, w, bias, y, ldy, j);
  for (; j < j1; ++j) block<L, MR, 1>(x, k, w, bias, y, ldy, j);
}

template <typename L>
void columns_avx2(int rows, const float* x, int64_t k, const void* wv, const float* bias, float* y,
                  int64_t ldy, int64_t j0, int64_t j1) {
  const auto* w = static_cast<const typename L::W*>(wv);
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

void columns_any(bool wide, DType wt, int rows, const float* x, int64_t k, const void* w,
                 const float* bias, float* y, int64_t ldy, int64_t j0, int64_t j1) {
  if (wide) return rowwise_columns_avx512(wt, rows, x, k, w, bias, y, ldy, j0, j1);
  switch (wt) {
    case DType::f32:
      return columns_avx2<LoadF32>(rows, x, k, w, bias, y, ldy, j0, j1);
    case DType::bf16:
      return columns_avx2<LoadBF16>(rows, x, k, w, bias, y, ldy, j0, j1);
    default:
      return columns_avx2<LoadF16>(rows, x, k, w, bias, y, ldy, j0, j1);
  }
}

// Tiles of weight rows, each passed over by every row of x (four at a time).
void product(DType wt, int64_t m, int64_t n, int64_t k, const float* x, const void* w,
             const float* bias, float* y) {
  const bool wide = onednn_has_avx512();
  const int64_t row_bytes = std::max<int64_t>(1, k * int64_t(itemsize(wt)));
  const int64_t tile = std::max<int64_t>(4, kTileBytes / row_bytes / 4 * 4);
  auto run_tile = [&](int64_t t) {
    const int64_t j0 = t * tile, j1 = std::min(n, j0 + tile);
    for (int64_t i = 0; i < m; i += 4)
      columns_any(wide, wt, int(std::min<int64_t>(4, m - i)), x + i * k, k, w, bias, y + i * n, n,
                  j0, j1);
  };
  const int64_t tiles = (n + tile - 1) / tile;
  if (m * n * k < kParallelMacs || tiles == 1) {
    for (int64_t t = 0; t < tiles; ++t) run_tile(t);
    return;
  }
  parallel_claim(tiles, run_tile);
}

}  // namespace

Tensor linear_rowwise(const Tensor& x_in, const Tensor& w_in, const Tensor& bias_in) {
  const DType wt = w_in.dtype();
  if (x_in.dtype() != DType::f32 || (wt != DType::f32 && wt != DType::bf16 && wt != DType::f16))
    return Tensor();
  const Tensor x = x_in.contiguous(), w = w_in.contiguous();
  const int64_t m = x.size(0), k = x.size(1), n = w.size(0);
  Tensor bias;
  if (bias_in.defined()) {
    const Tensor b = bias_in.contiguous();
    bias = Tensor::empty({n}, DType::f32);
    to_float(b.raw_data(), b.dtype(), bias.data<float>(), n);
  }
  Tensor y = Tensor::empty({m, n}, DType::f32);
  if (m == 0 || n == 0) return y;
  const float* pb = bias.defined() ? bias.data<float>() : nullptr;
  float* py = y.data<float>();
  product(wt, m, n, k, x.data<float>(), w.raw_data(), pb, py);
  return y;
}

}  // namespace zenith::cpu
