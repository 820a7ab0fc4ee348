// Runs an ONNX graph with zenith's ops: the interpreter behind `zenith deploy` of an exported
// .onnx file. It covers the exporter's op set (onnx_export.h) and what other exporters write for
// the same CNNs: Conv, Relu (and the other unary ops), MaxPool, AveragePool, GlobalAveragePool,
// Gemm, MatMul, Add/Sub/Mul/Div/Pow/Max/Min, Flatten, Reshape, Transpose, BatchNormalization,
// Softmax, LogSoftmax, Identity. Anything else is refused when the model loads, naming the op.
#pragma once

#include <string>
#include <vector>

#include "onnx/onnx_graph.h"
#include "zenith/nn.h"

namespace zenith::onnx {

class OnnxModel {
 public:
  explicit OnnxModel(OnnxGraph graph);  // fails on an unsupported op or a missing value
  static OnnxModel load(const std::string& path);

  // One tensor per graph input, in order; returns the graph's outputs.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs) const;
  const OnnxGraph& graph() const { return graph_; }

 private:
  OnnxGraph graph_;
};

// A Cell whose forward runs the graph's single input -> first output (inference: no parameters,
// no gradient).
nn::CellPtr onnx_cell(const std::string& path);

}  // namespace zenith::onnx
