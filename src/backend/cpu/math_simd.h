// Branch-free float32 math that GCC vectorises inside `#pragma omp simd` loops: exp, tanh,
// sigmoid, the normal CDF (for exact gelu). Each is checked against its std:: reference on many
// random inputs in tests/ops/unary_test.cpp (relative error within ~1e-6).
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

// Forced inline: these must inline into the vectorised loops, and GCC's unit-growth limits
// otherwise stop inlining in files with many kernel instantiations.
#define ZENITH_SIMD_INLINE inline __attribute__((always_inline))

namespace zenith::cpu::simd {

// c ? a : b through the bits. GCC will not if-convert a float ternary whose result feeds more
// float arithmetic (-ftrapping-math), which blocks vectorisation; integer selects are fine.
ZENITH_SIMD_INLINE float select(bool c, float a, float b) {
  int32_t m = -int32_t(c);
  return __builtin_bit_cast(
      float, (m & __builtin_bit_cast(int32_t, a)) | (~m & __builtin_bit_cast(int32_t, b)));
}
ZENITH_SIMD_INLINE double select(bool c, double a, double b) {
  int64_t m = -int64_t(c);
  return __builtin_bit_cast(
      double, (m & __builtin_bit_cast(int64_t, a)) | (~m & __builtin_bit_cast(int64_t, b)));
}
template <typename T>
ZENITH_SIMD_INLINE T select(bool c, T a, T b) {
  return c ? a : b;
}

ZENITH_SIMD_INLINE float abs(float x) {
  return __builtin_bit_cast(float, __builtin_bit_cast(int32_t, x) & 0x7fffffff);
}
// |x| with the sign of s.
ZENITH_SIMD_INLINE float copysign(float x, float s) {
  int32_t sign = __builtin_bit_cast(int32_t, s) & int32_t(0x80000000u);
  return __builtin_bit_cast(float, (__builtin_bit_cast(int32_t, x) & 0x7fffffff) | sign);
}

// e^r for |r| <= ln2/2 (Cephes' degree-6 polynomial) and n = round(x / ln2) with r = x - n ln2,
// for x already clamped to [-87.34, 88.72].
ZENITH_SIMD_INLINE float exp_reduced(float xc, float& n) {
  n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  return p * r * r + r + 1.0f;
}

// e^x: x = n ln2 + r with |r| <= ln2/2, 2^n built in the exponent bits (split in two factors so
// n = 128 and n = -126 stay representable).
// Below -87.34 (the smallest normal) returns 0; above 88.72 returns inf; NaN stays NaN.
ZENITH_SIMD_INLINE float exp(float x) {
  const float lo = -87.3365448f, hi = 88.7228391f;
  float xc = select(x < lo, lo, x);
  xc = select(xc > hi, hi, xc);
  float n;
  float p = exp_reduced(xc, n);
  int32_t ni = int32_t(n);
  int32_t n1 = ni >> 1, n2 = ni - n1;
  float s1 = __builtin_bit_cast(float, (n1 + 127) << 23);
  float s2 = __builtin_bit_cast(float, (n2 + 127) << 23);
  float y = p * s1 * s2;
  y = select(x < lo, 0.0f, y);
  return select(x > hi, __builtin_inff(), y);
}

// e^x for x <= 0 (a softmax's exp(l - max)), bit for bit exp(x) there: n >= -126 after the
// clamp, so 2^n is one factor; no overflow to test. Faster than exp in the fused output
// layer's loop. NaN stays NaN.
ZENITH_SIMD_INLINE float exp_nonpositive(float x) {
  const float lo = -87.3365448f;
  float n;
  float p = exp_reduced(select(x < lo, lo, x), n);
  float scale = __builtin_bit_cast(float, (int32_t(n) + 127) << 23);
  return select(x < lo, 0.0f, p * scale);
}

// log(x): x = m 2^e with m in [sqrt(1/2), sqrt(2)), Cephes' degree-9 polynomial for log(m).
// Denormals are scaled up first; 0 gives -inf, negatives NaN, inf inf, NaN NaN.
ZENITH_SIMD_INLINE float log(float x) {
  const bool denormal = x < 1.17549435e-38f;
  float xs = select(denormal, x * 8388608.0f, x);  // * 2^23
  int32_t bits = __builtin_bit_cast(int32_t, xs);
  float e = float(((bits >> 23) & 0xff) - 126) - select(denormal, 23.0f, 0.0f);
  float m = __builtin_bit_cast(float, (bits & 0x807fffff) | 0x3f000000);  // in [0.5, 1)
  const bool low = m < 0.707106781186547524f;
  e = select(low, e - 1.0f, e);
  m = select(low, m + m - 1.0f, m - 1.0f);
  float z = m * m;
  float y = 7.0376836292e-2f;
  y = y * m - 1.1514610310e-1f;
  y = y * m + 1.1676998740e-1f;
  y = y * m - 1.2420140846e-1f;
  y = y * m + 1.4249322787e-1f;
  y = y * m - 1.6668057665e-1f;
  y = y * m + 2.0000714765e-1f;
  y = y * m - 2.4999993993e-1f;
  y = y * m + 3.3333331174e-1f;
  y = y * m * z;
  y += -2.12194440e-4f * e;
  y += -0.5f * z;
  float r = m + y + 0.693359375f * e;
  r = select(x == 0.0f, -__builtin_inff(), r);
  r = select(x < 0.0f, __builtin_nanf(""), r);
  return select(x == __builtin_inff() || x != x, x, r);
}

// tanh: Cephes' odd polynomial for |x| < 0.625, else 1 - 2 / (e^{2|x|} + 1) with x's sign.
ZENITH_SIMD_INLINE float tanh(float x) {
  float ax = abs(x);
  float s = x * x;
  float small = ((((-5.70498872745e-3f * s + 2.06390887954e-2f) * s - 5.37397155531e-2f) * s +
                  1.33314422036e-1f) *
                     s -
                 3.33332819422e-1f) *
                    s * x +
                x;
  float e = exp(2.0f * ax);
  float big = copysign(1.0f - 2.0f / (e + 1.0f), x);
  return select(ax < 0.625f, small, big);
}

// 1 / (1 + e^-x); tends to 0 (not NaN) for very negative x.
ZENITH_SIMD_INLINE float sigmoid(float x) { return 1.0f / (1.0f + exp(-x)); }

// Phi(x) = P(N(0,1) <= x) = erfc(-x/sqrt2) / 2, with erfc from Numerical Recipes' Chebyshev
// fit (fractional error < 1.2e-7 on all of z >= 0), so both tails keep their relative accuracy.
ZENITH_SIMD_INLINE float normal_cdf(float x) {
  float z = abs(x) * 0.70710678118654752f;
  float t = 1.0f / (1.0f + 0.5f * z);
  float q = 0.17087277f;
  q = q * t - 0.82215223f;
  q = q * t + 1.48851587f;
  q = q * t - 1.13520398f;
  q = q * t + 0.27886807f;
  q = q * t - 0.18628806f;
  q = q * t + 0.09678418f;
  q = q * t + 0.37409196f;
  q = q * t + 1.00002368f;
  q = q * t - 1.26551223f;
  // exp(q - x^2/2) with x^2/2 kept exact (fma residual + two-sum): an argument error of one ulp
  // of x^2/2 would cost ~1e-5 relative accuracy in the far tail.
  float x2 = x * x;
  float x2_err = __builtin_fmaf(x, x, -x2);
  float a = -0.5f * x2, b = q - 0.5f * x2_err;
  float s = a + b;
  float bb = s - a;
  float s_err = (a - (s - bb)) + (b - bb);
  float half_erfc = 0.5f * t * exp(s) * (1.0f + s_err);  // erfc(|x|/sqrt2) / 2 = Phi(-|x|)
  return select(x < 0.0f, half_erfc, 1.0f - half_erfc);
}

// max of x[0, n), n >= 1, in 16 partial maxima that vectorise (GCC left an `omp simd
// reduction(max)` here a scalar select chain, latency-bound: ~1 cycle per element over a
// 32000-class row). NaN is not propagated: callers (softmax, cross-entropy) propagate it through
// exp and the sum instead.
template <typename T>
ZENITH_SIMD_INLINE T row_max(const T* x, int64_t n) {
  constexpr int64_t kLanes = 16;
  T lane[kLanes];
  for (int64_t l = 0; l < kLanes; ++l) lane[l] = x[0];
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) lane[l] = lane[l] < x[i + l] ? x[i + l] : lane[l];
  T m = x[0];
  for (; i < n; ++i) m = m < x[i] ? x[i] : m;
  for (int64_t l = 0; l < kLanes; ++l) m = m < lane[l] ? lane[l] : m;
  return m;
}

}  // namespace zenith::cpu::simd
