// CPU fused cross-entropy for class-index targets: log-softmax and NLL (with label smoothing and
// ignore_index) in one pass per row, and the gradient (the fast path of the one composed in
// src/ops/loss.cpp) in one more. Graph mode's linear_cross_entropy, the output layer's GEMM with
// both, is in linear_cross_entropy.cpp.
// M rows (samples, after moving the class dim last), C classes.
#include <cmath>

#include "backend/cpu/cross_entropy_rows.h"
#include "backend/cpu/elementwise_functors.h"
#include "backend/cpu/loops.h"
#include "backend/cpu/math_simd.h"
#include "core/dispatch.h"

namespace zenith::cpu {

// Throws for the first target that is neither a class in [0, C) nor ignore_index.
void check_targets(const int64_t* t, int64_t m, int64_t c, int64_t ignore_index) {
  for (int64_t i = 0; i < m; ++i)
    ZENITH_CHECK(t[i] == ignore_index || (t[i] >= 0 && t[i] < c), "[cross_entropy] target ", t[i],
                 " (sample ", i, ") is out of range for ", c, " classes");
}

// Number of targets that are not ignore_index: the divisor of the "mean" reduction.
int64_t count_valid(const int64_t* t, int64_t m, int64_t ignore_index) {
  int64_t n = 0;
  for (int64_t i = 0; i < m; ++i) n += t[i] != ignore_index;
  return n;
}

// The factor each row's gradient takes: 1 / (non-ignored targets) for "mean", else 1.
double gradient_scale(Reduction reduction, const int64_t* t, int64_t m, int64_t ignore_index) {
  return reduction == Reduction::kMean ? 1.0 / double(count_valid(t, m, ignore_index)) : 1.0;
}

namespace {

// cross_entropy_rows(logits [M, C], target [M]; ignore_index, label_smoothing, reduction)
//   -> loss ([M] for "none", 0 where ignored; else 0-d), log_sum [M] (log sum_c exp(x[c] - max),
//   saved for backward).
// loss = lse - (1 - eps) x[t] - eps / C sum_c x[c] with lse = max + log_sum, evaluated as
// log_sum + (1 - eps)(max - x[t]) + eps / C sum_c (max - x[c]) so that large logits lose nothing
// to rounding at the scale of max. "mean" divides the sum by the number of non-ignored targets.
std::vector<Tensor> cross_entropy_kernel(const std::vector<Tensor>& in,
                                         const CrossEntropyAttrs& attrs) {
  Tensor logits = in[0].contiguous();
  Tensor target = in[1].dtype() == DType::i64 ? in[1].contiguous() : in[1].to(DType::i64);
  const int64_t ignore_index = attrs.ignore_index;
  const double eps = attrs.label_smoothing;
  const Reduction reduction = attrs.reduction;
  const int64_t m = logits.shape()[0], c = logits.shape()[1];
  const int64_t* t = target.data<int64_t>();
  check_targets(t, m, c, ignore_index);
  Tensor rows = Tensor::empty({m}, logits.dtype(), logits.device());
  Tensor log_sums = Tensor::empty({m}, logits.dtype(), logits.device());
  Tensor loss =
      reduction == Reduction::kNone ? rows : Tensor::empty({}, logits.dtype(), logits.device());
  visit_float(logits.dtype(), "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    const T* x = logits.data<T>();
    T* lo = rows.data<T>();
    T* ls = log_sums.data<T>();
    const T on = T(1 - eps), off = T(eps / double(c));
    parallel_for(m, std::max<int64_t>(1, kGrain / c), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const T* row = x + i * c;
        const T mx = simd::row_max(row, c);
        T s = 0, below = 0;
#pragma omp simd reduction(+ : s, below)
        for (int64_t k = 0; k < c; ++k) {
          s += exp_of(row[k] - mx);
          below += mx - row[k];
        }
        const T log_sum = std::log(s);
        ls[i] = log_sum;
        lo[i] = t[i] == ignore_index ? T(0) : log_sum + on * (mx - row[t[i]]) + off * below;
      }
    });
    reduce_rows(loss, lo, t, m, ignore_index, reduction);
  });
  return {loss, log_sums};
}

// cross_entropy_rows_backward(dloss, logits, target, log_sum) -> dlogits [M, C]; dloss is [M]
// for "none", else 0-d (divided by the non-ignored count for "mean").
// dx[i, c] = dloss_i (softmax(x)[i, c] - (1 - eps) [c == t_i] - eps / C), 0 for ignored rows.
std::vector<Tensor> cross_entropy_backward_kernel(const std::vector<Tensor>& in,
                                                  const CrossEntropyAttrs& attrs) {
  Tensor logits = in[1].contiguous();
  Tensor dloss = in[0].dtype() == logits.dtype() ? in[0].contiguous() : in[0].to(logits.dtype());
  Tensor target = in[2].dtype() == DType::i64 ? in[2].contiguous() : in[2].to(DType::i64);
  Tensor log_sums = in[3].contiguous();
  const int64_t ignore_index = attrs.ignore_index;
  const double eps = attrs.label_smoothing;
  const Reduction reduction = attrs.reduction;
  const int64_t m = logits.shape()[0], c = logits.shape()[1];
  Tensor dx = Tensor::empty({m, c}, logits.dtype(), logits.device());
  visit_float(logits.dtype(), "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    const T* x = logits.data<T>();
    const T* g = dloss.data<T>();
    const T* ls = log_sums.data<T>();
    const int64_t* t = target.data<int64_t>();
    T* o = dx.data<T>();
    const T on = T(1 - eps), off = T(eps / double(c));
    const bool per_row = reduction == Reduction::kNone;
    const T scale = T(gradient_scale(reduction, t, m, ignore_index));
    parallel_for(m, std::max<int64_t>(1, kGrain / c), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        T* orow = o + i * c;
        if (t[i] == ignore_index) {
          std::fill(orow, orow + c, T(0));
          continue;
        }
        const T* row = x + i * c;
        const T mx = simd::row_max(row, c);
        const T gi = (per_row ? g[i] : g[0]) * scale, log_sum = ls[i], goff = gi * off;
#pragma omp simd
        for (int64_t k = 0; k < c; ++k) orow[k] = gi * exp_of((row[k] - mx) - log_sum) - goff;
        orow[t[i]] -= gi * on;
      }
    });
  });
  return {dx};
}

ZENITH_REGISTER_KERNEL(cross_entropy_rows, CPU, cross_entropy_kernel);
ZENITH_REGISTER_KERNEL(cross_entropy_rows_backward, CPU, cross_entropy_backward_kernel);

}  // namespace
}  // namespace zenith::cpu
