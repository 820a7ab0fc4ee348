// Fused optimizer updates: one pass over a parameter's contiguous data does weight decay, the
// slot updates and the parameter update, vectorised and split across the OpenMP pool.
// Scalars are attributes; inputs are plain contiguous tensors of one float dtype (ops::
// momentum_update / adam_update validate this before dispatching).
#include <cmath>

#include "backend/cpu/loops.h"
#include "core/dispatch.h"

namespace zenith::cpu {
namespace {

// Below this many elements a parameter is updated on one thread (fork/join costs more).
constexpr int64_t kOptimGrain = 16384;

// momentum_update(param, grad, velocity?): g = grad + wd * p; v = momentum * v + g;
// p -= lr * (nesterov ? g + momentum * v : v). Without a velocity: p -= lr * g.
std::vector<Tensor> momentum_update_kernel(const std::vector<Tensor>& in,
                                           const MomentumUpdateAttrs& attrs) {
  const Tensor& param = in[0];
  const bool has_velocity = in.size() > 2 && in[2].defined();
  const double lr = attrs.lr, mom = attrs.momentum;
  const double wd = attrs.weight_decay;
  const bool nesterov = attrs.nesterov;
  visit_float(param.dtype(), "momentum_update", [&](auto tag) {
    using T = decltype(tag);
    T* __restrict p = param.data<T>();
    const T* __restrict g = in[1].data<T>();
    T* __restrict v = has_velocity ? in[2].data<T>() : nullptr;
    const T tlr = T(lr), tm = T(mom), twd = T(wd);
    parallel_for(param.numel(), kOptimGrain, [&](int64_t b, int64_t e) {
      if (!has_velocity) {
#pragma omp simd
        for (int64_t i = b; i < e; ++i) p[i] -= tlr * (g[i] + twd * p[i]);
      } else if (nesterov) {
#pragma omp simd
        for (int64_t i = b; i < e; ++i) {
          T gi = g[i] + twd * p[i];
          T vi = tm * v[i] + gi;
          v[i] = vi;
          p[i] -= tlr * (gi + tm * vi);
        }
      } else {
#pragma omp simd
        for (int64_t i = b; i < e; ++i) {
          T vi = tm * v[i] + (g[i] + twd * p[i]);
          v[i] = vi;
          p[i] -= tlr * vi;
        }
      }
    });
  });
  return {param};
}

// adam_update(param, grad, m, v) at 1-based `step`, PyTorch's formulas:
// decoupled (AdamW): p *= 1 - lr * wd; else g += wd * p.
// m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
// p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
std::vector<Tensor> adam_update_kernel(const std::vector<Tensor>& in,
                                       const AdamUpdateAttrs& attrs) {
  const Tensor& param = in[0];
  const double lr = attrs.lr, b1 = attrs.beta1;
  const double b2 = attrs.beta2, eps = attrs.eps;
  const double wd = attrs.weight_decay;
  const bool decoupled = attrs.decoupled;
  const int64_t step = attrs.step;
  const double step_size = lr / (1.0 - std::pow(b1, double(step)));
  const double inv_bc2_sqrt = 1.0 / std::sqrt(1.0 - std::pow(b2, double(step)));
  visit_float(param.dtype(), "adam_update", [&](auto tag) {
    using T = decltype(tag);
    T* __restrict p = param.data<T>();
    const T* __restrict g = in[1].data<T>();
    T* __restrict m = in[2].data<T>();
    T* __restrict v = in[3].data<T>();
    const T tb1 = T(b1), tb2 = T(b2), teps = T(eps), tstep = T(step_size);
    const T tinv = T(inv_bc2_sqrt);
    const T decay = decoupled ? T(1.0 - lr * wd) : T(1);
    const T l2 = decoupled ? T(0) : T(wd);
    parallel_for(param.numel(), kOptimGrain, [&](int64_t b, int64_t e) {
#pragma omp simd
      for (int64_t i = b; i < e; ++i) {
        T pi = p[i] * decay;
        T gi = g[i] + l2 * pi;
        T mi = tb1 * m[i] + (T(1) - tb1) * gi;
        T vi = tb2 * v[i] + (T(1) - tb2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi - tstep * mi / (std::sqrt(vi) * tinv + teps);
      }
    });
  });
  return {param};
}

ZENITH_REGISTER_KERNEL(momentum_update, CPU, momentum_update_kernel);
ZENITH_REGISTER_KERNEL(adam_update, CPU, adam_update_kernel);

}  // namespace
}  // namespace zenith::cpu
