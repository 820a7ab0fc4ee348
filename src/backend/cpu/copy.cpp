// CPU copy kernels: strided copy with dtype conversion, in-place copy with broadcasting, fill.
// Contiguous runs between float32 and bfloat16 (amp's casts) convert 8 values at a time.
#include <immintrin.h>

#include <cstring>

#include "backend/cpu/loops.h"
#include "backend/cpu/lowp_load.h"
#include "core/dispatch.h"

namespace zenith::cpu {
namespace {

// n float32 -> bfloat16, rounded to nearest even, NaN kept quiet: float_to_bf16 8 at a time.
void f32_to_bf16(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  const __m256i exp = _mm256_set1_epi32(0x7f800000), man = _mm256_set1_epi32(0x7fffff);
  const __m256i half = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1);
  for (; i + 8 <= n; i += 8) {
    const __m256i u = _mm256_castps_si256(_mm256_loadu_ps(src + i));
    const __m256i nan =
        _mm256_andnot_si256(_mm256_cmpeq_epi32(_mm256_and_si256(u, man), _mm256_setzero_si256()),
                            _mm256_cmpeq_epi32(_mm256_and_si256(u, exp), exp));
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(half, odd)), 16);
    const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    const __m256i v = _mm256_blendv_epi8(rounded, quiet, nan);
    // 32-bit lanes (all < 2^16) packed to 16 bits; packus works per 128-bit half.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(v, v), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_castsi256_si128(packed));
  }
  for (; i < n; ++i) dst[i] = float_to_bf16(src[i]);
}

// n bfloat16 -> float32 (exact).
void bf16_to_f32(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, LoadBF16::load8(src + i));
  for (; i < n; ++i) dst[i] = bf16_to_float(src[i]);
}

// dst[...] = convert(src[...]) over dst's shape; src strides already broadcast.
void strided_convert(const Tensor& dst, const Tensor& src) {
  Shape src_strides = broadcast_strides(src, dst.shape());
  StridedLoop<2> loop(dst.shape(), {dst.strides(), src_strides});
  char* dbase = static_cast<char*>(dst.raw_data());
  const char* sbase = static_cast<const char*>(src.raw_data());
  visit_dtype(dst.dtype(), [&](auto dtag) {
    using D = decltype(dtag);
    visit_dtype(src.dtype(), [&](auto stag) {
      using S = decltype(stag);
      D* d = reinterpret_cast<D*>(dbase);
      const S* s = reinterpret_cast<const S*>(sbase);
      loop.run([&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) {
        D* dp = d + off[0];
        const S* sp = s + off[1];
        if constexpr (std::is_same_v<D, S>) {
          if (st[0] == 1 && st[1] == 1) {
            std::memcpy(dp, sp, size_t(n) * sizeof(D));
            return;
          }
          for (int64_t i = 0; i < n; ++i) dp[i * st[0]] = sp[i * st[1]];
        } else if constexpr (std::is_same_v<D, BFloat16> && std::is_same_v<S, float>) {
          if (st[0] == 1 && st[1] == 1)
            f32_to_bf16(sp, reinterpret_cast<uint16_t*>(dp), n);
          else
            for (int64_t i = 0; i < n; ++i) dp[i * st[0]] = store<D>(load(sp[i * st[1]]));
        } else if constexpr (std::is_same_v<D, float> && std::is_same_v<S, BFloat16>) {
          if (st[0] == 1 && st[1] == 1)
            bf16_to_f32(reinterpret_cast<const uint16_t*>(sp), dp, n);
          else
            for (int64_t i = 0; i < n; ++i) dp[i * st[0]] = store<D>(load(sp[i * st[1]]));
        } else {
          for (int64_t i = 0; i < n; ++i) dp[i * st[0]] = store<D>(load(sp[i * st[1]]));
        }
      });
    });
  });
}

// copy(src; dtype) -> a new contiguous tensor of `dtype`.
std::vector<Tensor> copy_kernel(const std::vector<Tensor>& in, const CopyAttrs& attrs) {
  const Tensor& src = in[0];
  Tensor out = Tensor::empty(src.shape(), attrs.dtype, src.device());
  strided_convert(out, src);
  return {out};
}

// copy_(dst, src): writes src (broadcast, converted) into dst's elements in place.
std::vector<Tensor> copy_inplace_kernel(const std::vector<Tensor>& in, const NoAttrs&) {
  strided_convert(in[0], in[1]);
  return {in[0]};
}

// fill_(dst; value): every element of dst set to value, in place.
std::vector<Tensor> fill_kernel(const std::vector<Tensor>& in, const FillAttrs& attrs) {
  const Tensor& dst = in[0];
  const double value = attrs.value;
  StridedLoop<1> loop(dst.shape(), {dst.strides()});
  visit_dtype(dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* d = static_cast<T*>(dst.raw_data());
    T v = store<T>(value);
    loop.run([&](const std::array<int64_t, 1>& off, int64_t n, const std::array<int64_t, 1>& st) {
      T* p = d + off[0];
      for (int64_t i = 0; i < n; ++i) p[i * st[0]] = v;
    });
  });
  return {dst};
}

ZENITH_REGISTER_KERNEL(copy, CPU, copy_kernel);
ZENITH_REGISTER_KERNEL(copy_, CPU, copy_inplace_kernel);
ZENITH_REGISTER_KERNEL(fill_, CPU, fill_kernel);

}  // namespace
}  // namespace zenith::cpu
