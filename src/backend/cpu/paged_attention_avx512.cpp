// The AVX-512 path of the paged attention kernel (paged_attention_simd.inc): sixteen lanes per
// dot product and row update; bfloat16 caches widened by a shift, float16 by vcvtph2ps.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/cpu/paged_attention.h"

#pragma GCC push_options
#pragma GCC target("avx512f")

namespace zenith::cpu {
namespace avx512 {

// Sixteen lanes, summed by _mm512_reduce_add_ps's fixed tree.
struct V {
  using Reg = __m512;
  static constexpr int64_t kLanes = 16;
  static Reg zero() { return _mm512_setzero_ps(); }
  static Reg load(const float* p) { return _mm512_loadu_ps(p); }
  static Reg load(const BFloat16* p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static Reg load(const Half* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static void store(float* p, Reg r) { _mm512_storeu_ps(p, r); }
  static Reg set1(float x) { return _mm512_set1_ps(x); }
  static Reg fma(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
  static Reg mul(Reg a, Reg b) { return _mm512_mul_ps(a, b); }
  static float sum(Reg v) { return _mm512_reduce_add_ps(v); }
};
#include "backend/cpu/paged_attention_simd.inc"

}  // namespace avx512

template <typename C>
void paged_item_avx512(const PagedArgs<float, C>& a, int64_t item, float* scratch) {
  avx512::paged_item<avx512::V>(a, item, scratch);
}
template void paged_item_avx512(const PagedArgs<float, float>&, int64_t, float*);
template void paged_item_avx512(const PagedArgs<float, BFloat16>&, int64_t, float*);
template void paged_item_avx512(const PagedArgs<float, Half>&, int64_t, float*);

}  // namespace zenith::cpu

#pragma GCC pop_options
