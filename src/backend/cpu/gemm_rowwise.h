// The batch-invariant linear product (core/batch_invariant.h): y[m, n] = x[m, :] . w[n, :] +
// bias[n], each element reduced in the same order whatever the number of rows.
#pragma once

#include "zenith/tensor.h"

namespace zenith::cpu {

// x float32 [M, K], w [N, K] float32, bfloat16 or float16, bias [N] (any float dtype) or
// undefined; returns float32 [M, N]. Other dtypes: undefined (the caller takes its usual path).
Tensor linear_rowwise(const Tensor& x, const Tensor& w, const Tensor& bias);

// The AVX-512 register blocks (gemm_rowwise_avx512.cpp): y[i, j0 .. j1) for `rows` (1 to 4) rows
// of x [rows, k] against w [n, k] of `w_dtype` (float32, bfloat16, float16), bias float32 or null.
void rowwise_columns_avx512(DType w_dtype, int rows, const float* x, int64_t k, const void* w,
                            const float* bias, float* y, int64_t ldy, int64_t j0, int64_t j1);

}  // namespace zenith::cpu
