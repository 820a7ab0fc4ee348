// The AVX-512 VNNI path of the quantized linear kernels (quant_simd.inc): vpdpbusd sums four
// byte products into each int32 lane in one instruction, on 256-bit registers (AVX512VL); a
// q4_0 block unpacks in three instructions (vpsrlvw, AVX512BW).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backend/cpu/quant_kernels.h"
#include "backend/cpu/quant_repack.h"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512vnni")

namespace zenith::cpu {
namespace avx512 {

inline __m256i dot_u8s8(__m256i acc, __m256i u, __m256i s) {
  return _mm256_dpbusd_epi32(acc, u, s);
}

// The 16 bytes in both halves, the upper half shifted right by 4 (vpsrlvw), then masked.
inline __m256i unpack_q4_0(const uint8_t* qs) {
  const __m256i v =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  const __m256i shift = _mm256_set_epi64x(0x0004000400040004, 0x0004000400040004, 0, 0);
  return _mm256_and_si256(_mm256_srlv_epi16(v, shift), _mm256_set1_epi8(0x0F));
}

// Repacked weights: eight vpdpbusd, each against 4 activation bytes broadcast, in two chains.
template <QuantFormat>
inline __m256i dot8(const __m256i* v, const int8_t* q, int32_t start) {
  __m256i s0 = _mm256_set1_epi32(start), s1 = _mm256_setzero_si256();
  for (int k = 0; k < 8; k += 2) {
    int32_t q0, q1;
    std::memcpy(&q0, q + 4 * k, 4);
    std::memcpy(&q1, q + 4 * k + 4, 4);
    s0 = _mm256_dpbusd_epi32(s0, v[k], _mm256_set1_epi32(q0));
    s1 = _mm256_dpbusd_epi32(s1, v[k + 1], _mm256_set1_epi32(q1));
  }
  return _mm256_add_epi32(s0, s1);
}

#include "backend/cpu/quant_repack_simd.inc"
#include "backend/cpu/quant_simd.inc"

}  // namespace avx512

void quant_rows_avx512_vnni(const QuantRows& p, int64_t o0, int64_t o1) {
  avx512::rows_simd(p, o0, o1);
}

void quant_groups_x8_avx512_vnni(const QuantRows& p, int64_t g0, int64_t g1) {
  if (p.format == QuantFormat::q4_0)
    avx512::x8_groups<QuantFormat::q4_0>(p, g0, g1);
  else if (p.format == QuantFormat::q4_k)
    avx512::x8_groups<QuantFormat::q4_k>(p, g0, g1);
  else
    avx512::x8_groups<QuantFormat::q8_0>(p, g0, g1);
}

}  // namespace zenith::cpu

#pragma GCC pop_options
