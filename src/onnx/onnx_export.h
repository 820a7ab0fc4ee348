// Export of a network's inference forward to ONNX. The forward runs once, in eval mode without
// gradients, on an example batch while a dispatch observer records every op with its typed
// attributes (an eager trace: it does not need graph mode's capture, which records training
// steps); each op becomes its ONNX node, parameters and buffers become initializers under their
// dotted names, reshaping views become Flatten/Reshape, and BatchNormalization is folded into the
// conv before it. Control flow that depends on tensor values is baked in as traced.
//
// Exported ops: conv2d, relu and the other ONNX unary ops, add/sub/mul/div/pow/maximum/minimum,
// max/avg pooling, adaptive average pooling (global or evenly dividing), batch_norm (eval),
// linear (2-d input), matmul, softmax, log_softmax; to_plain and same-dtype copies are
// transparent. Any other op fails naming it.
#pragma once

#include <map>
#include <string>

#include "onnx/onnx_graph.h"
#include "zenith/nn.h"

namespace zenith::onnx {

struct OnnxExportOptions {
  bool fold_batch_norm = true;
  std::string graph_name = "zenith";
  std::map<std::string, std::string> metadata;  // written as the model's metadata_props
};

// The graph of `net`'s forward for inputs of `input_shape` [C, H, W] (dim 0, the batch, is
// symbolic: traced with 2 samples). The net's train/eval mode is restored afterwards.
OnnxGraph export_onnx(nn::Cell& net, const Shape& input_shape,
                      const OnnxExportOptions& options = {});

}  // namespace zenith::onnx
