// The CPU conv2d kernels' shared pieces: the geometry every kernel reads, and the entry points
// of the files that make them (conv.cpp: oneDNN and the registered kernels; conv_reference.cpp:
// float64 im2col; conv_few_channel_grad.cpp, conv_blocked_grad.cpp: AVX2 weight gradients).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/onednn.h"
#include "core/op_attrs.h"
#include "zenith/tensor.h"

namespace zenith::cpu {

struct ConvGeometry;
// Whether Winograd is tried for this shape (the rule is in conv.cpp).
bool winograd_candidate(const ConvGeometry& g);

// N batch, C in channels, H, W; O out channels, G groups, KH x KW kernel, OH x OW output: the
// geometry ops::conv2d resolved (Conv2dAttrs), unpacked.
struct ConvGeometry {
  int64_t N, C, H, W, O, G, KH, KW, OH, OW;
  std::vector<int64_t> stride, pad_l, pad_r, dilation;  // dilation as in PyTorch (1 = none)
  bool bias;

  explicit ConvGeometry(const Conv2dAttrs& a)
      : N(a.input_shape[0]),
        C(a.input_shape[1]),
        H(a.input_shape[2]),
        W(a.input_shape[3]),
        O(a.weight_shape[0]),
        G(a.groups),
        KH(a.weight_shape[2]),
        KW(a.weight_shape[3]),
        OH(a.output_shape[2]),
        OW(a.output_shape[3]),
        stride(a.stride),
        pad_l(a.pad_begin),
        pad_r(a.pad_end),
        dilation(a.dilation),
        bias(a.bias) {}
  Shape x_shape() const { return {N, C, H, W}; }
  Shape w_shape() const { return {O, C / G, KH, KW}; }
  Shape y_shape() const { return {N, O, OH, OW}; }
  // oneDNN's weight dims: [G, O/G, C/G, KH, KW] when grouped.
  onednn::Dims w_dims() const {
    if (G == 1) return {O, C, KH, KW};
    return {G, O / G, C / G, KH, KW};
  }
  onednn::Dims dnnl_dilation() const { return {dilation[0] - 1, dilation[1] - 1}; }
  onednn::Key key(const char* op) const {
    onednn::Key k(op);
    k.add(x_shape()).add(w_shape()).add(stride).add(pad_l).add(pad_r).add(dilation).add(G).add(
        int64_t(bias));
    k.add(int64_t(winograd_candidate(*this))).add(int64_t(conv_algorithm() == "winograd"));
    return k;
  }
};

// An input zero-padded to Hp x Wp per plane, so a kernel reads every tap of every output position
// without bounds checks: t is x itself (contiguous) where there is no padding. `pixel` floats
// make a pixel: 1 for plain NCHW ([N, C, Hp, Wp]), 8 for nChw8c ([N, C / 8, Hp, Wp, 8]).
struct PaddedInput {
  Tensor t;
  int64_t Hp, Wp;
};
PaddedInput pad_planes(const Tensor& x, const ConvGeometry& g, int64_t pixel);

// float32 weight gradient for few input channels (conv_few_channel_grad.cpp).
bool use_few_channel_grad(const ConvGeometry& g);
// -> {dw [O, C, KH, KW], db [O] (undefined without a bias)}
std::vector<Tensor> conv_backward_weights_few_channels(const Tensor& dy, const Tensor& x,
                                                       const ConvGeometry& g);

// float32 weight gradient of 3-wide, stride-1 convs on nChw8c (conv_blocked_grad.cpp).
bool use_blocked_grad(const ConvGeometry& g);
// -> {dw [O, C, KH, 3], db [O] (undefined without a bias)}
std::vector<Tensor> conv_backward_weights_blocked(const Tensor& dy, const Tensor& x,
                                                  const ConvGeometry& g);

// float64 im2col + gemm: the reference the float32 kernels are tested against
// (conv_reference.cpp).
template <typename T>
Tensor conv_forward_ref(const Tensor& xin, const Tensor& win, const Tensor& bias,
                        const ConvGeometry& g);
template <typename T>
Tensor conv_backward_data_ref(const Tensor& dyin, const Tensor& win, const ConvGeometry& g);
template <typename T>
std::vector<Tensor> conv_backward_weights_ref(const Tensor& dyin, const Tensor& xin,
                                              const ConvGeometry& g);

}  // namespace zenith::cpu
