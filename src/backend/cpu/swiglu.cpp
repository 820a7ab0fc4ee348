// SwiGLU kernels (the ops of src/ops/swiglu.cpp): out = silu(gate) up in one pass, and both
// gradients in one more; float32 uses the vectorisable sigmoid of math_simd.h, in 512-bit
// vectors where the CPU has AVX-512 (the build targets x86-64-v3). gate and up may be strided
// views (e.g. the two halves of one fused projection), dy may broadcast.
#include <cmath>

#include "backend/cpu/loops.h"
#include "backend/cpu/math_simd.h"
#include "backend/cpu/onednn_layout.h"
#include "core/dispatch.h"

namespace zenith::cpu {
namespace {

template <typename T>
ZENITH_SIMD_INLINE T sigmoid_of(T x) {
  if constexpr (std::is_same_v<T, float>)
    return simd::sigmoid(x);
  else
    return T(1) / (T(1) + std::exp(-x));
}

// Contiguous runs of n elements: out = silu(g) u; and dg, du from dy.
template <typename T>
ZENITH_SIMD_INLINE void forward_run(T* o, const T* g, const T* u, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) o[i] = g[i] * sigmoid_of(g[i]) * u[i];
}
template <typename T>
ZENITH_SIMD_INLINE void backward_run(T* dg, T* du, const T* dy, const T* g, const T* u, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const T s = sigmoid_of(g[i]);
    dg[i] = dy[i] * u[i] * s * (T(1) + g[i] * (T(1) - s));
    du[i] = dy[i] * g[i] * s;
  }
}

#define ZENITH_AVX512 \
  __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,prefer-vector-width=512")))
// The 512-bit loops take about half the time of the 256-bit ones at stories15M's shapes
// (bench/llm_ops).
ZENITH_AVX512 void forward_run_avx512(float* o, const float* g, const float* u, int64_t n) {
  forward_run(o, g, u, n);
}
ZENITH_AVX512 void backward_run_avx512(float* dg, float* du, const float* dy, const float* g,
                                       const float* u, int64_t n) {
  backward_run(dg, du, dy, g, u, n);
}
#undef ZENITH_AVX512

// swiglu(gate, up) -> silu(gate) up
std::vector<Tensor> swiglu_kernel(const std::vector<Tensor>& in, const NoAttrs&) {
  const Tensor &gate = in[0], &up = in[1];
  Tensor out = Tensor::empty(gate.shape(), gate.dtype(), gate.device());
  StridedLoop<3> loop(gate.shape(), {out.strides(), gate.strides(), up.strides()});
  visit_float(gate.dtype(), "swiglu", [&](auto tag) {
    using T = decltype(tag);
    T* o = out.data<T>();
    const T* g = gate.data<T>();
    const T* u = up.data<T>();
    const bool wide = std::is_same_v<T, float> && onednn_has_avx512();
    loop.run([&](const std::array<int64_t, 3>& off, int64_t n, const std::array<int64_t, 3>& st) {
      T* op = o + off[0];
      const T* gp = g + off[1];
      const T* up_ = u + off[2];
      if (st[1] == 1 && st[2] == 1) {
        if constexpr (std::is_same_v<T, float>)
          if (wide) return forward_run_avx512(op, gp, up_, n);
        return forward_run(op, gp, up_, n);
      }
      for (int64_t i = 0; i < n; ++i) {
        const T gv = gp[i * st[1]];
        op[i * st[0]] = gv * sigmoid_of(gv) * up_[i * st[2]];
      }
    });
  });
  return {out};
}

// swiglu_backward(dy, gate, up) -> {dgate, dup}:
// dgate = dy up s (1 + gate (1 - s)), dup = dy gate s, s = sigmoid(gate)
std::vector<Tensor> swiglu_backward_kernel(const std::vector<Tensor>& in, const NoAttrs&) {
  const Tensor &gate = in[1], &up = in[2];
  Tensor dy = in[0].dtype() == gate.dtype() ? in[0] : in[0].to(gate.dtype());
  const Shape& shape = gate.shape();
  Tensor dgate = Tensor::empty(shape, gate.dtype(), gate.device());
  Tensor dup = Tensor::empty(shape, gate.dtype(), gate.device());
  StridedLoop<5> loop(shape, {dgate.strides(), dup.strides(), broadcast_strides(dy, shape),
                              gate.strides(), up.strides()});
  visit_float(gate.dtype(), "swiglu_backward", [&](auto tag) {
    using T = decltype(tag);
    T* dg = dgate.data<T>();
    T* du = dup.data<T>();
    const T* d = dy.data<T>();
    const T* g = gate.data<T>();
    const T* u = up.data<T>();
    const bool wide = std::is_same_v<T, float> && onednn_has_avx512();
    loop.run([&](const std::array<int64_t, 5>& off, int64_t n, const std::array<int64_t, 5>& st) {
      T* dgp = dg + off[0];
      T* dup_ = du + off[1];
      const T* dp = d + off[2];
      const T* gp = g + off[3];
      const T* upp = u + off[4];
      if (st[0] == 1 && st[1] == 1 && st[2] == 1 && st[3] == 1 && st[4] == 1) {
        if constexpr (std::is_same_v<T, float>)
          if (wide) return backward_run_avx512(dgp, dup_, dp, gp, upp, n);
        return backward_run(dgp, dup_, dp, gp, upp, n);
      }
      for (int64_t i = 0; i < n; ++i) {
        const T gv = gp[i * st[3]], dv = dp[i * st[2]];
        const T s = sigmoid_of(gv);
        dgp[i * st[0]] = dv * upp[i * st[4]] * s * (T(1) + gv * (T(1) - s));
        dup_[i * st[1]] = dv * gv * s;
      }
    });
  });
  return {dgate, dup};
}

ZENITH_REGISTER_KERNEL(swiglu, CPU, swiglu_kernel);
ZENITH_REGISTER_KERNEL(swiglu_backward, CPU, swiglu_backward_kernel);

}  // namespace
}  // namespace zenith::cpu
