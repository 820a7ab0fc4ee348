// zenith's own 2x2 stride-2 max pooling on oneDNN's channel-blocked formats (nChw8c, nChw16c),
// optionally with the ReLU that follows it fused in: the AVX2 fast path of max_pool2d and the
// kernels of graph mode's max_pool2d_relu / max_pool2d_relu_backward (max_pool_2x2.cpp).
#pragma once

#include <vector>

#include "core/op_attrs.h"
#include "zenith/tensor.h"

namespace zenith::cpu {

// A float32 2x2 stride-2 unpadded window over channels a multiple of 8.
bool max_pool_2x2_fits(const Shape& x, const Pool2dAttrs& a, DType dtype);
// The block these kernels use for x: its own when it is stored as nChw8c or nChw16c, else the
// one oneDNN picks on this CPU (16 where it has AVX-512 and C allows, else 8).
int max_pool_2x2_block(const Tensor& x);
// -> {y (blocked), workspace}: y = max over each window (relu(max) with relu), the workspace
// [N * C / block, OH, OW, block / 8 * k] bytes: per 8 channels k bit masks, two naming each
// lane's window cell (0..3, the first maximum in (kh, kw) order, NaN winning as in the
// reference) and with relu a third, the lanes where relu's output is > 0 (k = 3).
std::vector<Tensor> max_pool_2x2(const Tensor& x, const Pool2dAttrs& a, int block, bool relu);
// Whether ws is such a workspace (for a pooling of x's shape; with relu or without).
bool is_max_pool_2x2_workspace(const Tensor& ws, const Shape& x, const Pool2dAttrs& a, bool relu);
// dx (blocked as the workspace says): each window's cells get dy where the workspace names them,
// else 0; with a relu workspace, dy only where relu's output was > 0 (relu_backward fused in).
Tensor max_pool_2x2_backward(const Tensor& dy, const Tensor& ws, const Shape& x,
                             const Pool2dAttrs& a);

}  // namespace zenith::cpu
