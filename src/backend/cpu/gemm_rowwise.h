// The batch-invariant linear product (core/batch_invariant.h): y[m, n] = x[m, :] . w[n, :] +
// bias[n], each element reduced in the same order whatever the number of rows.
#pragma once

#include "zenith/tensor.h"

namespace zenith::cpu {

// x float32 [M, K], w [N, K] float32, bfloat16 or float16, bias [N] (any float dtype) or
// undefined; returns float32 [M, N]. Other dtypes: undefined (the caller takes its usual path).
Tensor linear_rowwise(const Tensor& x, const Tensor& w, const Tensor& bias);

}  // namespace zenith::cpu
