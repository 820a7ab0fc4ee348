// The AVX-512 VNNI path of the quantized linear kernels (quant_simd.inc): vpdpbusd sums four
// byte products into each int32 lane in one instruction, on 256-bit registers (AVX512VL).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backend/cpu/quant_kernels.h"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512vnni")

namespace zenith::cpu {
namespace avx512 {

inline __m256i dot_u8s8(__m256i u, __m256i s) {
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
}

#include "backend/cpu/quant_simd.inc"

}  // namespace avx512

void quant_rows_avx512_vnni(const QuantRows& p, int64_t o0, int64_t o1) {
  avx512::rows_simd(p, o0, o1);
}

}  // namespace zenith::cpu

#pragma GCC pop_options
