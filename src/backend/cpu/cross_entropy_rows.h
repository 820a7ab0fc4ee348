// Pieces the CPU cross-entropy kernels share (loss.cpp's cross_entropy_rows and its backward,
// linear_cross_entropy.cpp): target checks and the "mean" and "sum" reductions.
// M rows, C classes.
#pragma once

#include <cstdint>

#include "core/op_attrs.h"
#include "zenith/tensor.h"

namespace zenith::cpu {

// Throws for the first target that is neither a class in [0, C) nor ignore_index.
void check_targets(const int64_t* t, int64_t m, int64_t c, int64_t ignore_index);

// Number of targets that are not ignore_index: the divisor of the "mean" reduction.
int64_t count_valid(const int64_t* t, int64_t m, int64_t ignore_index);

// The factor each row's gradient takes: 1 / (non-ignored targets) for "mean", else 1.
double gradient_scale(Reduction reduction, const int64_t* t, int64_t m, int64_t ignore_index);

// Writes the 0-d loss of the "mean" and "sum" reductions from the per-row losses `lo`.
template <typename T>
void reduce_rows(Tensor& loss, const T* lo, const int64_t* t, int64_t m, int64_t ignore_index,
                 Reduction reduction) {
  if (reduction == Reduction::kNone) return;
  double total = 0;
  for (int64_t i = 0; i < m; ++i) total += double(lo[i]);
  if (reduction == Reduction::kMean) total /= double(count_valid(t, m, ignore_index));
  loss.data<T>()[0] = T(total);
}

}  // namespace zenith::cpu
