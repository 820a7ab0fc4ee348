// CPU softmax and log_softmax over one dim, numerically stable (the row max is subtracted),
// with fused backward kernels (fast paths of the gradients composed in src/ops/softmax.cpp). x is
// viewed as [outer, D, inner] with D the softmax dim: rows (inner == 1) are processed one at a
// time, otherwise whole [D, inner] blocks vectorise over inner.
#include <cmath>

#include "backend/cpu/loops.h"
#include "backend/cpu/math_simd.h"
#include "core/dispatch.h"

namespace zenith::cpu {
namespace {

template <typename T>
ZENITH_SIMD_INLINE T exp_of(T x) {
  if constexpr (std::is_same_v<T, float>)
    return simd::exp(x);
  else
    return std::exp(x);
}

struct Blocks {
  int64_t outer = 1, d = 1, inner = 1;
};

Blocks blocks_of(const Tensor& x, int64_t dim) {
  Blocks b;
  if (x.dim() == 0) return b;
  for (int64_t i = 0; i < dim; ++i) b.outer *= x.shape()[size_t(i)];
  b.d = x.shape()[size_t(dim)];
  for (int64_t i = dim + 1; i < x.dim(); ++i) b.inner *= x.shape()[size_t(i)];
  return b;
}

// One row of D contiguous values: y = softmax(x) or log_softmax(x).
template <bool kLog, typename T>
void softmax_row(const T* x, T* y, int64_t d) {
  const T m = simd::row_max(x, d);
  T s = 0;
  if constexpr (kLog) {
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < d; ++i) s += exp_of(x[i] - m);
    // (x - m) - log(s): x - m is exact near the max, m + log(s) would round at m's scale.
    const T log_s = std::log(s);
#pragma omp simd
    for (int64_t i = 0; i < d; ++i) y[i] = (x[i] - m) - log_s;
  } else {
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < d; ++i) {
      T e = exp_of(x[i] - m);
      y[i] = e;
      s += e;
    }
    const T inv = T(1) / s;
#pragma omp simd
    for (int64_t i = 0; i < d; ++i) y[i] *= inv;
  }
}

// One [D, inner] block, reduced over D for every inner position at once.
template <bool kLog, typename T>
void softmax_block(const T* x, T* y, int64_t d, int64_t inner, T* m, T* s) {
  for (int64_t j = 0; j < inner; ++j) m[j] = x[j];
  for (int64_t r = 1; r < d; ++r) {
    const T* xr = x + r * inner;
#pragma omp simd
    for (int64_t j = 0; j < inner; ++j) m[j] = simd::select(xr[j] > m[j], xr[j], m[j]);
  }
  std::fill(s, s + inner, T(0));
  for (int64_t r = 0; r < d; ++r) {
    const T* xr = x + r * inner;
    T* yr = y + r * inner;
#pragma omp simd
    for (int64_t j = 0; j < inner; ++j) {
      T e = exp_of(xr[j] - m[j]);
      if constexpr (!kLog) yr[j] = e;
      s[j] += e;
    }
  }
  if constexpr (kLog) {
    for (int64_t j = 0; j < inner; ++j) s[j] = std::log(s[j]);
  } else {
    for (int64_t j = 0; j < inner; ++j) s[j] = T(1) / s[j];
  }
  for (int64_t r = 0; r < d; ++r) {
    const T* xr = x + r * inner;
    T* yr = y + r * inner;
    if constexpr (kLog) {
#pragma omp simd
      for (int64_t j = 0; j < inner; ++j) yr[j] = (xr[j] - m[j]) - s[j];
    } else {
#pragma omp simd
      for (int64_t j = 0; j < inner; ++j) yr[j] *= s[j];
    }
  }
}

// softmax(x; dim) / log_softmax(x; dim); 16-bit floats compute through float32.
template <bool kLog>
std::vector<Tensor> softmax_kernel(const std::vector<Tensor>& in, const SoftmaxAttrs& attrs) {
  const int64_t dim = attrs.dim;
  const DType dtype = in[0].dtype();
  Tensor x =
      (dtype == DType::f16 || dtype == DType::bf16) ? in[0].to(DType::f32) : in[0].contiguous();
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (x.numel() == 0) return {y.to(dtype)};
  Blocks b = blocks_of(x, dim);
  visit_float(x.dtype(), kLog ? "log_softmax" : "softmax", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    if (b.inner == 1) {
      parallel_for(b.outer, std::max<int64_t>(1, kGrain / b.d), [&](int64_t s, int64_t e) {
        for (int64_t o = s; o < e; ++o) softmax_row<kLog>(xp + o * b.d, yp + o * b.d, b.d);
      });
      return;
    }
    parallel_for(b.outer, std::max<int64_t>(1, kGrain / (b.d * b.inner)),
                 [&](int64_t s, int64_t e) {
                   std::vector<T> m(size_t(b.inner)), sums(size_t(b.inner));
                   for (int64_t o = s; o < e; ++o)
                     softmax_block<kLog>(xp + o * b.d * b.inner, yp + o * b.d * b.inner, b.d,
                                         b.inner, m.data(), sums.data());
                 });
  });
  return {y.dtype() == dtype ? y : y.to(dtype)};
}

// softmax:     dx = y (dy - sum_D(dy y))
// log_softmax: dx = dy - exp(y) sum_D(dy)
template <bool kLog>
std::vector<Tensor> softmax_backward_kernel(const std::vector<Tensor>& in,
                                            const SoftmaxAttrs& attrs) {
  const int64_t dim = attrs.dim;
  const DType dtype = in[1].dtype();
  const bool half = dtype == DType::f16 || dtype == DType::bf16;
  const DType compute = half ? DType::f32 : dtype;
  Tensor y = half ? in[1].to(compute) : in[1].contiguous();
  Tensor dy = in[0].dtype() == compute ? in[0].contiguous() : in[0].to(compute);
  Tensor dx = Tensor::empty(y.shape(), compute, y.device());
  if (y.numel() == 0) return {dx.to(dtype)};
  Blocks b = blocks_of(y, dim);
  visit_float(compute, kLog ? "log_softmax" : "softmax", [&](auto tag) {
    using T = decltype(tag);
    const T* yp = y.data<T>();
    const T* gp = dy.data<T>();
    T* op = dx.data<T>();
    parallel_for(b.outer, std::max<int64_t>(1, kGrain / (b.d * b.inner)),
                 [&](int64_t s, int64_t e) {
                   std::vector<T> acc(size_t(b.inner));
                   for (int64_t o = s; o < e; ++o) {
                     const int64_t base = o * b.d * b.inner;
                     const T* yo = yp + base;
                     const T* go = gp + base;
                     T* xo = op + base;
                     if (b.inner == 1) {
                       T sum = 0;
                       if constexpr (kLog) {
#pragma omp simd reduction(+ : sum)
                         for (int64_t i = 0; i < b.d; ++i) sum += go[i];
#pragma omp simd
                         for (int64_t i = 0; i < b.d; ++i) xo[i] = go[i] - exp_of(yo[i]) * sum;
                       } else {
#pragma omp simd reduction(+ : sum)
                         for (int64_t i = 0; i < b.d; ++i) sum += go[i] * yo[i];
#pragma omp simd
                         for (int64_t i = 0; i < b.d; ++i) xo[i] = yo[i] * (go[i] - sum);
                       }
                       continue;
                     }
                     std::fill(acc.begin(), acc.end(), T(0));
                     T* a = acc.data();
                     for (int64_t r = 0; r < b.d; ++r) {
                       const T* yr = yo + r * b.inner;
                       const T* gr = go + r * b.inner;
                       if constexpr (kLog) {
#pragma omp simd
                         for (int64_t j = 0; j < b.inner; ++j) a[j] += gr[j];
                       } else {
#pragma omp simd
                         for (int64_t j = 0; j < b.inner; ++j) a[j] += gr[j] * yr[j];
                       }
                     }
                     for (int64_t r = 0; r < b.d; ++r) {
                       const T* yr = yo + r * b.inner;
                       const T* gr = go + r * b.inner;
                       T* xr = xo + r * b.inner;
                       if constexpr (kLog) {
#pragma omp simd
                         for (int64_t j = 0; j < b.inner; ++j) xr[j] = gr[j] - exp_of(yr[j]) * a[j];
                       } else {
#pragma omp simd
                         for (int64_t j = 0; j < b.inner; ++j) xr[j] = yr[j] * (gr[j] - a[j]);
                       }
                     }
                   }
                 });
  });
  return {half ? dx.to(dtype) : dx};
}

ZENITH_REGISTER_KERNEL(softmax, CPU, softmax_kernel<false>);
ZENITH_REGISTER_KERNEL(log_softmax, CPU, softmax_kernel<true>);
ZENITH_REGISTER_KERNEL(softmax_backward, CPU, softmax_backward_kernel<false>);
ZENITH_REGISTER_KERNEL(log_softmax_backward, CPU, softmax_backward_kernel<true>);

}  // namespace
}  // namespace zenith::cpu
