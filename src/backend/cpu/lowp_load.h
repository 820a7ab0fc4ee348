// Loads of float32, bfloat16 and float16 values as float32 (AVX2 + F16C), one type per struct
// so a kernel templated on it has no dtype branch in its inner loop.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "zenith/dtype.h"

namespace zenith::cpu {

struct LoadF32 {
  using W = float;
  static __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
  static float load1(float v) { return v; }
};

struct LoadBF16 {
  using W = uint16_t;
  static __m256 load8(const uint16_t* p) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static float load1(uint16_t v) { return bf16_to_float(v); }
};

struct LoadF16 {
  using W = uint16_t;
  static __m256 load8(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static float load1(uint16_t v) { return half_to_float(v); }
};

}  // namespace zenith::cpu
