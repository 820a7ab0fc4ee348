// An ONNX graph as plain C++ values: what the exporter builds from a traced forward, what the
// passes rewrite (BatchNorm folded into the conv before it), what is written as and read from an
// ONNX ModelProto (opset 17, IR version 8: what Debian's onnx 1.12 checks), and what the
// interpreter (onnx_runtime.h) runs.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "zenith/tensor.h"

namespace zenith::onnx {

inline constexpr int64_t kOnnxOpset = 17;
inline constexpr int64_t kOnnxIrVersion = 8;

// An attribute's value: INT, FLOAT, INTS (all the exported ops need) or STRING (read from other
// exporters, e.g. auto_pad "NOTSET").
using OnnxAttr = std::variant<int64_t, float, std::vector<int64_t>, std::string>;

struct OnnxNode {
  std::string op_type;  // "Conv"
  std::string name;
  std::vector<std::string> inputs;  // "" for an absent optional input
  std::vector<std::string> outputs;
  std::map<std::string, OnnxAttr> attrs;

  int64_t int_attr(const std::string& key, int64_t fallback) const;
  float float_attr(const std::string& key, float fallback) const;
  std::vector<int64_t> ints_attr(const std::string& key, std::vector<int64_t> fallback) const;
  std::string string_attr(const std::string& key, const std::string& fallback) const;
};

// A graph input or output: float32; dims < 0 are the symbolic batch size ("batch").
struct OnnxValue {
  std::string name;
  Shape shape;
};

struct OnnxGraph {
  std::string name;
  std::vector<OnnxNode> nodes;                               // in execution order
  std::vector<std::pair<std::string, Tensor>> initializers;  // f32 or i64, contiguous
  std::vector<OnnxValue> inputs, outputs;
  std::map<std::string, std::string> metadata;  // the model's metadata_props

  const Tensor* initializer(const std::string& name) const;
  // The nodes that read `value`.
  std::vector<const OnnxNode*> consumers(const std::string& value) const;
  // How many nodes of each op type, e.g. {"Conv": 20, "Relu": 17}.
  std::map<std::string, int64_t> op_counts() const;
};

// Folds every BatchNormalization whose input is a Conv's output read by nothing else into that
// Conv's weight and bias (scale = gamma / sqrt(var + eps): W' = W scale, b' = (b - mean) scale
// + beta, in double), drops initializers no node reads any more, and returns how many it folded.
int fold_batch_norms(OnnxGraph& graph);

// The ModelProto's bytes (onnx_proto.cpp), and the file; errors name the path.
std::string serialize_onnx(const OnnxGraph& graph);
void write_onnx(const OnnxGraph& graph, const std::string& path);
OnnxGraph parse_onnx(const std::string& bytes, const std::string& origin);
OnnxGraph read_onnx(const std::string& path);

}  // namespace zenith::onnx
