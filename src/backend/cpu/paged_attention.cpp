// The paged attention op's CPU kernel (paged_attention.h): float64 on the scalar path (the
// reference), float32 on the fastest instruction set (over a float32, bfloat16 or float16
// cache), items split over the claiming pool.
#include "backend/cpu/paged_attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/claim_pool.h"
#include "core/dispatch.h"

namespace zenith::cpu {
namespace {

// Multiply-adds below which a call stays on the calling thread (waking the pool costs more).
constexpr int64_t kParallelWork = int64_t(1) << 16;

namespace scalar {
template <typename T>
struct V {
  using Reg = T;
  static constexpr int64_t kLanes = 1;
  static Reg zero() { return T(0); }
  template <typename C>
  static Reg load(const C* p) {
    return T(widen(*p));
  }
  static void store(T* p, Reg r) { *p = r; }
  static Reg set1(T x) { return x; }
  static Reg fma(Reg a, Reg b, Reg c) { return std::fma(a, b, c); }
  static Reg mul(Reg a, Reg b) { return a * b; }
  static T sum(Reg r) { return r; }
};
#include "backend/cpu/paged_attention_simd.inc"
}  // namespace scalar

namespace avx2 {
// Eight lanes, summed as (0+4, 1+5, 2+6, 3+7), then pairs, then the last two.
struct V {
  using Reg = __m256;
  static constexpr int64_t kLanes = 8;
  static Reg zero() { return _mm256_setzero_ps(); }
  static Reg load(const float* p) { return _mm256_loadu_ps(p); }
  static Reg load(const BFloat16* p) {  // the bits shifted into a float's top half
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static Reg load(const Half* p) {  // F16C's vcvtph2ps
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static void store(float* p, Reg r) { _mm256_storeu_ps(p, r); }
  static Reg set1(float x) { return _mm256_set1_ps(x); }
  static Reg fma(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }
  static Reg mul(Reg a, Reg b) { return _mm256_mul_ps(a, b); }
  static float sum(Reg v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
};
#include "backend/cpu/paged_attention_simd.inc"
}  // namespace avx2

template <typename T, typename C = T>
PagedArgs<T, C> args_of(const std::vector<Tensor>& in, Tensor& out, const PagedAttentionAttrs& a) {
  const Tensor &q = in[0], &k = in[1], &table = in[3];
  return {q.data<T>(),
          k.data<C>(),
          in[2].data<C>(),
          out.data<T>(),
          table.data<int32_t>(),
          in[4].data<int32_t>(),
          in[5].data<int32_t>(),
          q.size(1),
          k.size(1),
          q.size(2),
          q.size(3),
          k.size(2),
          table.size(1),
          T(a.scale)};
}

// Multiply-adds of the call: two per key per head and value.
template <typename T, typename C>
int64_t work_of(const PagedArgs<T, C>& a) {
  int64_t keys = 0;
  for (int64_t i = 0; i < a.n; ++i) keys += int64_t(a.pos[i]) + 1;
  return keys * a.heads * a.d * 2;
}

template <typename T, typename C, typename Item>
void run_items(const PagedArgs<T, C>& a, Item item) {
  const int64_t count = a.n * a.kv_heads, size = paged_scratch(a);
  auto one = [&](int64_t i) {
    thread_local std::vector<T> scratch;
    if (int64_t(scratch.size()) < size) scratch.resize(size_t(size));
    item(a, i, scratch.data());
  };
  if (work_of(a) < kParallelWork || count == 1) {
    for (int64_t i = 0; i < count; ++i) one(i);
    return;
  }
  parallel_claim(count, one);
}

std::vector<Tensor> paged_attention_kernel(const std::vector<Tensor>& in,
                                           const PagedAttentionAttrs& attrs) {
  Tensor out = Tensor::empty(in[0].shape(), in[0].dtype());
  if (in[0].dtype() == DType::f64) {
    const PagedArgs<double> a = args_of<double>(in, out, attrs);
    run_items(a,
              [](const PagedArgs<double>& x, int64_t i, double* s) { paged_item_scalar(x, i, s); });
  } else if (in[1].dtype() == DType::bf16) {
    paged_attention_f32(paged_isa(), args_of<float, BFloat16>(in, out, attrs));
  } else if (in[1].dtype() == DType::f16) {
    paged_attention_f32(paged_isa(), args_of<float, Half>(in, out, attrs));
  } else {
    paged_attention_f32(paged_isa(), args_of<float>(in, out, attrs));
  }
  return {out};
}
ZENITH_REGISTER_KERNEL(paged_attention, CPU, paged_attention_kernel);

}  // namespace

void paged_item_scalar(const PagedArgs<double>& a, int64_t item, double* scratch) {
  scalar::paged_item<scalar::V<double>>(a, item, scratch);
}
template <typename C>
void paged_item_scalar(const PagedArgs<float, C>& a, int64_t item, float* scratch) {
  scalar::paged_item<scalar::V<float>>(a, item, scratch);
}
template <typename C>
void paged_item_avx2(const PagedArgs<float, C>& a, int64_t item, float* scratch) {
  avx2::paged_item<avx2::V>(a, item, scratch);
}

bool paged_isa_supported(PagedIsa isa) {
  switch (isa) {
    case PagedIsa::scalar:
      return true;
    case PagedIsa::avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case PagedIsa::avx512:
      return __builtin_cpu_supports("avx512f");
  }
  return false;
}

PagedIsa paged_isa() {
  static const PagedIsa best = paged_isa_supported(PagedIsa::avx512) ? PagedIsa::avx512
                               : paged_isa_supported(PagedIsa::avx2) ? PagedIsa::avx2
                                                                     : PagedIsa::scalar;
  return best;
}

const char* paged_isa_name(PagedIsa isa) {
  switch (isa) {
    case PagedIsa::scalar:
      return "scalar";
    case PagedIsa::avx2:
      return "avx2";
    case PagedIsa::avx512:
      return "avx512";
  }
  return "?";
}

template <typename C>
void paged_attention_f32(PagedIsa isa, const PagedArgs<float, C>& a) {
  switch (isa) {
    case PagedIsa::avx512:
      return run_items(a, paged_item_avx512<C>);
    case PagedIsa::avx2:
      return run_items(a, paged_item_avx2<C>);
    case PagedIsa::scalar:
      return run_items(a, paged_item_scalar<C>);
  }
}

#define ZENITH_PAGED_CACHE(C)                                                   \
  template void paged_item_scalar(const PagedArgs<float, C>&, int64_t, float*); \
  template void paged_item_avx2(const PagedArgs<float, C>&, int64_t, float*);   \
  template void paged_attention_f32(PagedIsa, const PagedArgs<float, C>&);
ZENITH_PAGED_CACHE(float)
ZENITH_PAGED_CACHE(BFloat16)
ZENITH_PAGED_CACHE(Half)
#undef ZENITH_PAGED_CACHE

}  // namespace zenith::cpu
