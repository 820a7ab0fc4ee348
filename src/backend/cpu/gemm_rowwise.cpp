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
#include "backend/cpu/gemm_rowwise_block.h"
#include "backend/cpu/lowp_load.h"
#include "backend/cpu/onednn_layout.h"

namespace zenith::cpu {
namespace {

// Weight bytes per tile: well inside L2, so rows of x after the first read it from cache.
constexpr int64_t kTileBytes = int64_t(1) << 17;
// Products below this many multiply-adds run on the calling thread.
constexpr int64_t kParallelMacs = int64_t(1) << 18;

// Eight lanes; the lanes summed as (0+4, 1+5, 2+6, 3+7), then pairs, then the last two.
struct Avx2 {
  using Reg = __m256;
  static constexpr int64_t kLanes = 8;
  static Reg zero() { return _mm256_setzero_ps(); }
  static Reg load(const float* p) { return _mm256_loadu_ps(p); }
  static Reg fma(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }
  static float sum(Reg v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
};
// lowp_load.h's loaders under the name the blocks use.
template <typename Base>
struct Load8 : Base {
  static __m256 load(const typename Base::W* p) { return Base::load8(p); }
};

void columns_any(bool wide, DType wt, int rows, const float* x, int64_t k, const void* w,
                 const float* bias, float* y, int64_t ldy, int64_t j0, int64_t j1) {
  if (wide) return rowwise_columns_avx512(wt, rows, x, k, w, bias, y, ldy, j0, j1);
  switch (wt) {
    case DType::f32:
      return rowwise::rows_columns<Avx2, Load8<LoadF32>>(rows, x, k, w, bias, y, ldy, j0, j1);
    case DType::bf16:
      return rowwise::rows_columns<Avx2, Load8<LoadBF16>>(rows, x, k, w, bias, y, ldy, j0, j1);
    default:
      return rowwise::rows_columns<Avx2, Load8<LoadF16>>(rows, x, k, w, bias, y, ldy, j0, j1);
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
