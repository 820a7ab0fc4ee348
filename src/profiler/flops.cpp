#include "profiler/flops.h"

namespace zenith::profiler {
namespace {

// N batch, O out channels, OH x OW output; each output sums C / groups x KH x KW products.
double conv_flops(const Conv2dAttrs& a) {
  const Shape& w = a.weight_shape;  // [O, C / groups, KH, KW]
  if (w.size() != 4) return 0;
  return 2.0 * double(shape_numel(a.output_shape)) * double(w[1] * w[2] * w[3]);
}

}  // namespace

double op_flops(const dispatch::OpEvent& event) {
  switch (event.op) {
    case OpId::conv2d:
      return conv_flops(event.attrs.get<OpId::conv2d>());
    case OpId::conv2d_backward_data:
      return conv_flops(event.attrs.get<OpId::conv2d_backward_data>());
    case OpId::conv2d_backward_weights:
      return conv_flops(event.attrs.get<OpId::conv2d_backward_weights>());
    // graph mode's fused first layer: the convolution, and its weight gradient
    case OpId::conv2d_relu_max_pool:
      return conv_flops(event.attrs.get<OpId::conv2d_relu_max_pool>());
    case OpId::conv2d_relu_max_pool_backward:
      return conv_flops(event.attrs.get<OpId::conv2d_relu_max_pool_backward>());
    case OpId::matmul:      // (a [.., n, k], b [.., k, m]) -> [.., n, m]
    case OpId::matmul_add:  // (a [n, k], b [k, m], c) -> [n m elements]
    case OpId::linear:      // (x [M, in], weight [out, in]) -> [M, out]
      if (event.inputs.empty() || event.outputs.empty() || !event.inputs[0].defined() ||
          event.inputs[0].dim() < 1)
        return 0;
      return 2.0 * double(event.outputs[0].numel()) * double(event.inputs[0].size(-1));
    case OpId::linear_cross_entropy:  // the logits' GEMM: (x [M, D], weight [V, D]) -> [M, V]
      if (event.outputs.size() < 2 || !event.inputs[0].defined() || !event.outputs[1].defined())
        return 0;
      return 2.0 * double(event.outputs[1].numel()) * double(event.inputs[0].size(-1));
    case OpId::linear_cross_entropy_grads:  // that GEMM and the gradient's two (one without
                                            // dweight: a frozen weight), as large
      if (event.inputs.size() < 2 || !event.inputs[0].defined() || !event.inputs[1].defined() ||
          event.inputs[0].dim() != 2 || event.inputs[1].dim() != 2)
        return 0;
      return (event.outputs.size() > 2 && event.outputs[2].defined() ? 6.0 : 4.0) *
             double(event.inputs[0].size(0)) * double(event.inputs[1].numel());
    default:
      return 0;
  }
}

}  // namespace zenith::profiler
