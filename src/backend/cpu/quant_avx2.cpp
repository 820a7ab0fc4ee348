// The AVX2 path of the quantized linear kernels (quant_simd.inc): vpmaddubsw's pairwise
// 16-bit sums (no overflow: 2 * 127 * 127 < 32768), widened by vpmaddwd.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backend/cpu/quant_kernels.h"

namespace zenith::cpu {
namespace avx2 {

inline __m256i dot_u8s8(__m256i acc, __m256i u, __m256i s) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
}

inline __m256i unpack_q4_0(const uint8_t* qs) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i mask = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), mask), _mm_and_si128(v, mask));
}

#include "backend/cpu/quant_simd.inc"

}  // namespace avx2

void quant_rows_avx2(const QuantRows& p, int64_t o0, int64_t o1) { avx2::rows_simd(p, o0, o1); }

}  // namespace zenith::cpu
