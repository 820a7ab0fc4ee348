// Fused optimizer updates: one pass over a parameter's contiguous data does weight decay, the
// slot updates and the parameter update, vectorised and split across the OpenMP pool.
// Scalars are attributes; inputs are plain contiguous tensors of one float dtype (ops::
// momentum_update / adam_update validate this before dispatching).
#include <algorithm>
#include <cmath>

#include "backend/cpu/loops.h"
#include "core/dispatch.h"

namespace zenith::cpu {
namespace {

// Below this many elements a parameter is updated on one thread (fork/join costs more).
constexpr int64_t kOptimGrain = 16384;

// momentum_update's math on elements [b, e) of one parameter: g = grad + wd * p;
// v = momentum * v + g; p -= lr * (nesterov ? g + momentum * v : v). Without a velocity:
// p -= lr * g.
template <typename T>
void momentum_range(T* __restrict p, const T* __restrict g, T* __restrict v,
                    const MomentumUpdateAttrs& a, int64_t b, int64_t e) {
  const T tlr = T(a.lr), tm = T(a.momentum), twd = T(a.weight_decay);
  if (!v) {
#pragma omp simd
    for (int64_t i = b; i < e; ++i) p[i] -= tlr * (g[i] + twd * p[i]);
  } else if (a.nesterov) {
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
}

// adam_update's math on elements [b, e) at 1-based `step`, PyTorch's formulas:
// decoupled (AdamW): p *= 1 - lr * wd; else g += wd * p.
// m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
// p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
template <typename T>
void adam_range(T* __restrict p, const T* __restrict g, T* __restrict m, T* __restrict v,
                const AdamUpdateAttrs& a, int64_t b, int64_t e) {
  const double step_size = a.lr / (1.0 - std::pow(a.beta1, double(a.step)));
  const double inv_bc2_sqrt = 1.0 / std::sqrt(1.0 - std::pow(a.beta2, double(a.step)));
  const T tb1 = T(a.beta1), tb2 = T(a.beta2), teps = T(a.eps), tstep = T(step_size);
  const T tinv = T(inv_bc2_sqrt);
  const T decay = a.decoupled ? T(1.0 - a.lr * a.weight_decay) : T(1);
  const T l2 = a.decoupled ? T(0) : T(a.weight_decay);
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
}

template <typename T>
T* data_or_null(const std::vector<Tensor>& in, size_t i) {
  return i < in.size() && in[i].defined() ? in[i].data<T>() : nullptr;
}

// momentum_update(param, grad, velocity?) -> param
std::vector<Tensor> momentum_update_kernel(const std::vector<Tensor>& in,
                                           const MomentumUpdateAttrs& attrs) {
  const Tensor& param = in[0];
  visit_float(param.dtype(), "momentum_update", [&](auto tag) {
    using T = decltype(tag);
    T* p = param.data<T>();
    const T* g = in[1].data<T>();
    T* v = data_or_null<T>(in, 2);
    parallel_for(param.numel(), kOptimGrain,
                 [&](int64_t b, int64_t e) { momentum_range(p, g, v, attrs, b, e); });
  });
  return {param};
}

// adam_update(param, grad, m, v) -> param
std::vector<Tensor> adam_update_kernel(const std::vector<Tensor>& in,
                                       const AdamUpdateAttrs& attrs) {
  const Tensor& param = in[0];
  visit_float(param.dtype(), "adam_update", [&](auto tag) {
    using T = decltype(tag);
    T* p = param.data<T>();
    const T* g = in[1].data<T>();
    T* m = in[2].data<T>();
    T* v = in[3].data<T>();
    parallel_for(param.numel(), kOptimGrain,
                 [&](int64_t b, int64_t e) { adam_range(p, g, m, v, attrs, b, e); });
  });
  return {param};
}

// The elements of `count` parameters as one range: f(k, b, e) on elements [b, e) of parameter
// k, the whole range split once across the pool (one fork/join for every parameter).
template <typename F>
void over_all_params(const std::vector<Tensor>& in, int64_t count, F&& f) {
  std::vector<int64_t> start(size_t(count) + 1, 0);
  for (int64_t k = 0; k < count; ++k)
    start[size_t(k + 1)] = start[size_t(k)] + in[size_t(k)].numel();
  parallel_for(start.back(), kOptimGrain, [&](int64_t b, int64_t e) {
    int64_t k = int64_t(std::upper_bound(start.begin(), start.end(), b) - start.begin()) - 1;
    for (; k < count && start[size_t(k)] < e; ++k) {
      const int64_t lo = std::max(b, start[size_t(k)]), hi = std::min(e, start[size_t(k + 1)]);
      if (lo < hi) f(k, lo - start[size_t(k)], hi - start[size_t(k)]);
    }
  });
}

// multi_momentum_update(params[n], grads[n], velocities[n]?): one pass over all of them.
std::vector<Tensor> multi_momentum_update_kernel(const std::vector<Tensor>& in,
                                                 const MultiMomentumUpdateAttrs& attrs) {
  const int64_t n = attrs.count;
  ZENITH_CHECK(n > 0 && int64_t(in.size()) >= 2 * n, "[multi_momentum_update] expected ", 2 * n,
               " or ", 3 * n, " inputs, got ", in.size());
  const MomentumUpdateAttrs one{.lr = attrs.lr,
                                .momentum = attrs.momentum,
                                .weight_decay = attrs.weight_decay,
                                .nesterov = attrs.nesterov};
  visit_float(in[0].dtype(), "multi_momentum_update", [&](auto tag) {
    using T = decltype(tag);
    over_all_params(in, n, [&](int64_t k, int64_t b, int64_t e) {
      momentum_range(in[size_t(k)].data<T>(), in[size_t(n + k)].data<T>(),
                     data_or_null<T>(in, size_t(2 * n + k)), one, b, e);
    });
  });
  return {};
}

// multi_adam_update(params[n], grads[n], m[n], v[n]): one pass over all of them.
std::vector<Tensor> multi_adam_update_kernel(const std::vector<Tensor>& in,
                                             const MultiAdamUpdateAttrs& attrs) {
  const int64_t n = attrs.count;
  ZENITH_CHECK(n > 0 && int64_t(in.size()) == 4 * n, "[multi_adam_update] expected ", 4 * n,
               " inputs, got ", in.size());
  const AdamUpdateAttrs one{.lr = attrs.lr,
                            .beta1 = attrs.beta1,
                            .beta2 = attrs.beta2,
                            .eps = attrs.eps,
                            .weight_decay = attrs.weight_decay,
                            .decoupled = attrs.decoupled,
                            .step = attrs.step};
  visit_float(in[0].dtype(), "multi_adam_update", [&](auto tag) {
    using T = decltype(tag);
    over_all_params(in, n, [&](int64_t k, int64_t b, int64_t e) {
      adam_range(in[size_t(k)].data<T>(), in[size_t(n + k)].data<T>(),
                 in[size_t(2 * n + k)].data<T>(), in[size_t(3 * n + k)].data<T>(), one, b, e);
    });
  });
  return {};
}

ZENITH_REGISTER_KERNEL(momentum_update, CPU, momentum_update_kernel);
ZENITH_REGISTER_KERNEL(adam_update, CPU, adam_update_kernel);
ZENITH_REGISTER_KERNEL(multi_momentum_update, CPU, multi_momentum_update_kernel);
ZENITH_REGISTER_KERNEL(multi_adam_update, CPU, multi_adam_update_kernel);

}  // namespace
}  // namespace zenith::cpu
