// The AVX2 path of the quantized linear kernels (quant_simd.inc): vpmaddubsw's pairwise
// 16-bit sums (no overflow: 2 * 127 * 127 < 32768), widened by vpmaddwd.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backend/cpu/quant_kernels.h"
#include "backend/cpu/quant_repack.h"

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

// Repacked weights, start plus the 8 rows' dot products with the block's 32 activations.
// q4_0: the 8 products of pairs of (nibble <= 15, |int8| <= 127) sum to at most 30480 in 16
// bits, so the 16-bit sums add without saturating before one vpmaddwd widens them.
// q8_0: bytes w + 128 against the activations would saturate vpmaddubsw's pair sums, so each
// chunk is made signed again (w = byte ^ 0x80) and multiplied as |w| (<= 128) by the activation
// with w's sign (<= 127), pairs <= 32512, each widened by vpmaddwd at once: the exact sum of w a,
// which is what VNNI's start + sum (w + 128) a is (start = -128 sum(a)), so both give the same
// bits.
template <QuantFormat F>
inline __m256i dot8(const __m256i* v, const int8_t* q, int32_t start) {
  const __m256i ones = _mm256_set1_epi16(1);
  if constexpr (F == QuantFormat::q8_0) {
    (void)start;
    const __m256i bias = _mm256_set1_epi8(char(0x80));
    __m256i s0 = _mm256_setzero_si256(), s1 = s0;
    for (int k = 0; k < 8; k += 2) {
      int32_t q0, q1;
      std::memcpy(&q0, q + 4 * k, 4);
      std::memcpy(&q1, q + 4 * k + 4, 4);
      const __m256i w0 = _mm256_xor_si256(v[k], bias), w1 = _mm256_xor_si256(v[k + 1], bias);
      const __m256i p0 =
          _mm256_maddubs_epi16(_mm256_abs_epi8(w0), _mm256_sign_epi8(_mm256_set1_epi32(q0), w0));
      const __m256i p1 =
          _mm256_maddubs_epi16(_mm256_abs_epi8(w1), _mm256_sign_epi8(_mm256_set1_epi32(q1), w1));
      s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(p0, ones));
      s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(p1, ones));
    }
    return _mm256_add_epi32(s0, s1);
  } else {
    __m256i s0 = _mm256_setzero_si256(), s1 = s0;
    for (int k = 0; k < 8; k += 2) {
      int32_t q0, q1;
      std::memcpy(&q0, q + 4 * k, 4);
      std::memcpy(&q1, q + 4 * k + 4, 4);
      s0 = _mm256_add_epi16(s0, _mm256_maddubs_epi16(v[k], _mm256_set1_epi32(q0)));
      s1 = _mm256_add_epi16(s1, _mm256_maddubs_epi16(v[k + 1], _mm256_set1_epi32(q1)));
    }
    return _mm256_add_epi32(_mm256_madd_epi16(_mm256_add_epi16(s0, s1), ones),
                            _mm256_set1_epi32(start));
  }
}

#include "backend/cpu/quant_repack_simd.inc"
#include "backend/cpu/quant_simd.inc"

}  // namespace avx2

void quant_rows_avx2(const QuantRows& p, int64_t o0, int64_t o1) { avx2::rows_simd(p, o0, o1); }

void quant_groups_x8_avx2(const QuantRows& p, int64_t g0, int64_t g1) {
  if (p.format == QuantFormat::q4_0)
    avx2::x8_groups<QuantFormat::q4_0>(p, g0, g1);
  else if (p.format == QuantFormat::q4_k)
    avx2::x8_groups<QuantFormat::q4_k>(p, g0, g1);
  else
    avx2::x8_groups<QuantFormat::q8_0>(p, g0, g1);
}

}  // namespace zenith::cpu
