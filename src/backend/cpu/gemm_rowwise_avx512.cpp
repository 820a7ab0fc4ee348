// The row-wise kernel's register blocks in 512-bit vectors (gemm_rowwise.cpp picks them where
// the CPU has AVX-512): sixteen FMA lanes over K in steps of 16, the lanes summed by
// _mm512_reduce_add_ps's fixed tree, the K % 16 tail in order, then the bias. The order is the
// same for every row count, so rows stay batch-invariant on this machine.
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "backend/cpu/gemm_rowwise.h"
#include "zenith/dtype.h"

// After the headers above, so only this file's code (and the blocks below) is built for AVX-512.
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq")
#include "backend/cpu/gemm_rowwise_block.h"

namespace zenith::cpu {
namespace {

// Sixteen lanes, summed by _mm512_reduce_add_ps (a fixed sequence of shuffles and adds).
struct Avx512 {
  using Reg = __m512;
  static constexpr int64_t kLanes = 16;
  static Reg zero() { return _mm512_setzero_ps(); }
  static Reg load(const float* p) { return _mm512_loadu_ps(p); }
  static Reg fma(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
  static float sum(Reg v) { return _mm512_reduce_add_ps(v); }
};

struct Load32 {
  using W = float;
  static __m512 load(const float* p) { return _mm512_loadu_ps(p); }
  static float load1(float v) { return v; }
};
struct LoadB16 {
  using W = uint16_t;
  static __m512 load(const uint16_t* p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static float load1(uint16_t v) { return bf16_to_float(v); }
};
struct LoadH16 {
  using W = uint16_t;
  static __m512 load(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static float load1(uint16_t v) { return half_to_float(v); }
};

}  // namespace

void rowwise_columns_avx512(DType w_dtype, int rows, const float* x, int64_t k, const void* w,
                            const float* bias, float* y, int64_t ldy, int64_t j0, int64_t j1) {
  switch (w_dtype) {
    case DType::f32:
      return rowwise::rows_columns<Avx512, Load32>(rows, x, k, w, bias, y, ldy, j0, j1);
    case DType::bf16:
      return rowwise::rows_columns<Avx512, LoadB16>(rows, x, k, w, bias, y, ldy, j0, j1);
    default:
      return rowwise::rows_columns<Avx512, LoadH16>(rows, x, k, w, bias, y, ldy, j0, j1);
  }
}

}  // namespace zenith::cpu
