// Helpers shared by the op families in src/ops (not public API): input normalisation, and the
// internal differentiable ops that gradients are written with.
#pragma once

#include <vector>

#include "core/dispatch.h"
#include "zenith/autograd.h"
#include "zenith/ops.h"

namespace zenith::ops::detail {

// x in plain strided layout (tensors in a backend layout, e.g. oneDNN blocked, are converted).
Tensor plain(const Tensor& x);
// d in [-ndim, ndim) as a non-negative dim (a 0-d tensor takes -1 and 0); errors name `op`.
int64_t wrap_dim(int64_t d, int64_t ndim, const char* op);
// x is defined and float32 or float64; errors name `op`.
void check_float(const Tensor& x, const char* op);
// A 1- or 2-element option of `op` as [h, w], all values >= min.
std::vector<int64_t> pair_option(const std::vector<int64_t>& v, const char* op, const char* name,
                                 int64_t min);
// A 0-d tensor holding v on like's device, typed to combine with `like` without changing its
// dtype (PyTorch's rule: a Python scalar does not promote a float tensor).
Tensor scalar_like(double v, const Tensor& like);

// zeros(shape) with src added at index along dim (the gradient of gather), differentiable: its
// own gradient is a gather.
Tensor scatter_add_into(const Tensor& src, const Tensor& index, int64_t dim, const Shape& shape);

// attention(q, k, v, key_padding_mask?, attn_mask?) -> {out, lse} composed of ops, materialising
// the [B, Hq, T, S] scores: the reference the fused kernels are tested against.
std::vector<Tensor> attention_composed(const std::vector<Tensor>& in, const AttentionAttrs& a);

}  // namespace zenith::ops::detail
