// Graph mode's first-layer fusion: a 3x3 convolution over few input channels, the ReLU and the
// 2x2 stride-2 max pooling after it in one pass that never writes the convolution's output, and
// the backward that takes the pooled gradient straight to the weight gradient (conv_pool.cpp).
#pragma once

#include <vector>

#include "core/op_attrs.h"
#include "zenith/tensor.h"

namespace zenith::cpu {

// float32, 3x3 kernel, stride 1, no padding or dilation, one group, at most 4 input channels,
// output channels a multiple of 8, an output at least 2x2.
bool conv_relu_max_pool_fits(const Conv2dAttrs& a, DType dtype);
// The pooled output's size: floor(OH / 2) x floor(OW / 2) (a last odd row or column dropped).
Shape conv_relu_max_pool_shape(const Conv2dAttrs& a);
// -> {y = relu(max_pool2d_2x2(conv2d(x, w) + b)) in nChw{block}c, workspace [N, O / block,
// PH, PW, block] bytes: per pooled pixel and channel the window cell of the maximum (0..3, the
// first in (kh, kw) order, NaN winning) and 4 where y > 0}. block 8 or 16; b may be undefined.
std::vector<Tensor> conv_relu_max_pool(const Tensor& x, const Tensor& w, const Tensor& b,
                                       const Conv2dAttrs& a, int block);
// Whether ws is such a workspace for a convolution of attributes a.
bool is_conv_relu_max_pool_workspace(const Tensor& ws, const Conv2dAttrs& a);
// (dy pooled gradient, x, ws) -> {dw [O, C, 3, 3], db [O] (undefined without a.bias)}: the
// weight gradient of the convolution through the pooling's and the ReLU's backward.
std::vector<Tensor> conv_relu_max_pool_backward(const Tensor& dy, const Tensor& x, const Tensor& ws,
                                                const Conv2dAttrs& a);
// The channel block oneDNN's blocked formats use on this CPU for C channels (16 where its ISA
// has AVX-512 and C allows, else 8).
int preferred_channel_block(int64_t channels);

}  // namespace zenith::cpu
