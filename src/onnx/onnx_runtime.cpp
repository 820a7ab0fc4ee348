// The ONNX interpreter: one function per op type over zenith's ops, values by name.
#include "onnx/onnx_runtime.h"

#include <functional>
#include <map>
#include <set>

#include "zenith/autograd.h"
#include "zenith/ops.h"

namespace zenith::onnx {
namespace {

using Inputs = std::vector<Tensor>;
using OpFn = std::function<Tensor(const OnnxNode&, const Inputs&)>;

int64_t axis_of(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

// ONNX pads [x1_begin, x2_begin, x1_end, x2_end] as zenith's symmetric [ph, pw].
std::vector<int64_t> symmetric_pads(const OnnxNode& n) {
  const auto pads = n.ints_attr("pads", {0, 0, 0, 0});
  ZENITH_CHECK(pads.size() == 4 && pads[0] == pads[2] && pads[1] == pads[3], "[onnx] ", n.op_type,
               " node '", n.name, "': only symmetric 2-d pads are supported");
  const std::string auto_pad = n.string_attr("auto_pad", "NOTSET");
  ZENITH_CHECK(auto_pad == "NOTSET", "[onnx] ", n.op_type, " node '", n.name, "': auto_pad ",
               auto_pad, " is not supported (explicit pads are)");
  return {pads[0], pads[1]};
}

Tensor conv(const OnnxNode& n, const Inputs& in) {
  ops::Conv2dOptions o;
  o.stride = n.ints_attr("strides", {1, 1});
  o.padding = symmetric_pads(n);
  o.dilation = n.ints_attr("dilations", {1, 1});
  o.groups = n.int_attr("group", 1);
  return ops::conv2d(in[0], in[1], in.size() > 2 ? in[2] : Tensor(), o);
}

Tensor pool(const OnnxNode& n, const Inputs& in, bool max) {
  ZENITH_CHECK(n.int_attr("ceil_mode", 0) == 0, "[onnx] ", n.op_type, " node '", n.name,
               "': ceil_mode is not supported");
  const auto kernel = n.ints_attr("kernel_shape", {});
  ZENITH_CHECK(kernel.size() == 2, "[onnx] ", n.op_type, " node '", n.name,
               "': only 2-d pooling is supported");
  const auto stride = n.ints_attr("strides", {1, 1});
  const auto pads = symmetric_pads(n);
  if (max) {
    ZENITH_CHECK(n.ints_attr("dilations", {1, 1}) == std::vector<int64_t>({1, 1}), "[onnx] ",
                 "MaxPool node '", n.name, "': dilations are not supported");
    return ops::max_pool2d(in[0], kernel, stride, pads);
  }
  return ops::avg_pool2d(in[0], kernel, stride, pads, n.int_attr("count_include_pad", 0) != 0);
}

// alpha op(A) op(B) + beta C
Tensor gemm(const OnnxNode& n, const Inputs& in) {
  Tensor a = n.int_attr("transA", 0) ? in[0].t() : in[0];
  Tensor y = n.int_attr("transB", 0) ? ops::linear(a, in[1]) : ops::matmul(a, in[1]);
  const float alpha = n.float_attr("alpha", 1.0f), beta = n.float_attr("beta", 1.0f);
  if (alpha != 1.0f) y = ops::mul(y, double(alpha));
  if (in.size() > 2 && in[2].defined())
    y = ops::add(y, beta == 1.0f ? in[2] : ops::mul(in[2], double(beta)));
  return y;
}

Tensor flatten(const OnnxNode& n, const Inputs& in) {
  const Shape& s = in[0].shape();
  const int64_t axis = axis_of(n.int_attr("axis", 1), int64_t(s.size()));
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= s[size_t(d)];
  return in[0].reshape({outer, in[0].numel() / std::max<int64_t>(outer, 1)});
}

Tensor reshape(const OnnxNode& n, const Inputs& in) {
  ZENITH_CHECK(n.int_attr("allowzero", 0) == 0, "[onnx] Reshape node '", n.name,
               "': allowzero is not supported");
  Shape target = in[1].to_int_vector();
  for (size_t d = 0; d < target.size(); ++d)
    if (target[d] == 0) target[d] = in[0].size(int64_t(d));
  return in[0].reshape(target);
}

Tensor batch_norm(const OnnxNode& n, const Inputs& in) {
  return ops::batch_norm(in[0], in[1], in[2], in[3], in[4], /*training=*/false, 0.1,
                         n.float_attr("epsilon", 1e-5f));
}

Tensor softmax(const OnnxNode& n, const Inputs& in, bool log) {
  const int64_t axis = axis_of(n.int_attr("axis", -1), in[0].dim());
  return log ? ops::log_softmax(in[0], axis) : ops::softmax(in[0], axis);
}

Tensor transpose(const OnnxNode& n, const Inputs& in) {
  std::vector<int64_t> perm = n.ints_attr("perm", {});
  if (perm.empty())
    for (int64_t d = in[0].dim() - 1; d >= 0; --d) perm.push_back(d);
  return in[0].permute(perm).contiguous();
}

const std::map<std::string, OpFn>& op_table() {
  auto unary = [](Tensor (*f)(const Tensor&)) {
    return [f](const OnnxNode&, const Inputs& in) { return f(in[0]); };
  };
  auto binary = [](Tensor (*f)(const Tensor&, const Tensor&)) {
    return [f](const OnnxNode&, const Inputs& in) { return f(in[0], in[1]); };
  };
  static const std::map<std::string, OpFn> table = {
      {"Conv", conv},
      {"Relu", unary(ops::relu)},
      {"Sigmoid", unary(ops::sigmoid)},
      {"Tanh", unary(ops::tanh)},
      {"Exp", unary(ops::exp)},
      {"Log", unary(ops::log)},
      {"Sqrt", unary(ops::sqrt)},
      {"Neg", unary(ops::neg)},
      {"Abs", unary(ops::abs)},
      {"Erf", unary(ops::erf)},
      {"Add", binary(ops::add)},
      {"Sub", binary(ops::sub)},
      {"Mul", binary(ops::mul)},
      {"Div", binary(ops::div)},
      {"Pow", binary(ops::pow)},
      {"Max", binary(ops::maximum)},
      {"Min", binary(ops::minimum)},
      {"MaxPool", [](const OnnxNode& n, const Inputs& in) { return pool(n, in, true); }},
      {"AveragePool", [](const OnnxNode& n, const Inputs& in) { return pool(n, in, false); }},
      {"GlobalAveragePool",
       [](const OnnxNode&, const Inputs& in) {
         return ops::adaptive_avg_pool2d(in[0], {1, 1});
       }},
      {"Gemm", gemm},
      {"MatMul", binary(ops::matmul)},
      {"Flatten", flatten},
      {"Reshape", reshape},
      {"Transpose", transpose},
      {"BatchNormalization", batch_norm},
      {"Softmax", [](const OnnxNode& n, const Inputs& in) { return softmax(n, in, false); }},
      {"LogSoftmax", [](const OnnxNode& n, const Inputs& in) { return softmax(n, in, true); }},
      {"Identity", [](const OnnxNode&, const Inputs& in) { return in[0]; }},
  };
  return table;
}

class OnnxCell : public nn::Cell {
 public:
  explicit OnnxCell(OnnxModel model) : model_(std::move(model)) {
    ZENITH_CHECK(model_.graph().inputs.size() == 1 && !model_.graph().outputs.empty(),
                 "[onnx] a served model needs one input and an output, the graph has ",
                 model_.graph().inputs.size(), " and ", model_.graph().outputs.size());
  }
  Tensor forward(const Tensor& x) override { return model_.run({x})[0]; }
  std::string type_name() const override { return "OnnxGraph"; }

 private:
  OnnxModel model_;
};

}  // namespace

OnnxModel::OnnxModel(OnnxGraph graph) : graph_(std::move(graph)) {
  std::set<std::string> known;
  for (const auto& v : graph_.inputs) known.insert(v.name);
  for (const auto& [name, t] : graph_.initializers) known.insert(name);
  for (const OnnxNode& n : graph_.nodes) {
    ZENITH_CHECK(op_table().count(n.op_type), "[onnx] op ", n.op_type, " (node '", n.name,
                 "') is not supported by zenith's ONNX interpreter");
    for (const std::string& in : n.inputs)
      ZENITH_CHECK(in.empty() || known.count(in), "[onnx] node '", n.name, "' reads '", in,
                   "' before anything writes it");
    ZENITH_CHECK(
        n.outputs.size() == 1 || n.op_type == "BatchNormalization" || n.op_type == "MaxPool",
        "[onnx] node '", n.name, "' has ", n.outputs.size(), " outputs");
    known.insert(n.outputs[0]);
  }
  for (const auto& v : graph_.outputs)
    ZENITH_CHECK(known.count(v.name), "[onnx] the graph's output '", v.name, "' is never computed");
}

OnnxModel OnnxModel::load(const std::string& path) { return OnnxModel(read_onnx(path)); }

std::vector<Tensor> OnnxModel::run(const std::vector<Tensor>& inputs) const {
  ZENITH_CHECK(inputs.size() == graph_.inputs.size(), "[onnx] the graph takes ",
               graph_.inputs.size(), " inputs, got ", inputs.size());
  NoGradGuard no_grad;
  std::map<std::string, Tensor> values;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const OnnxValue& v = graph_.inputs[i];
    bool fits = inputs[i].dim() == int64_t(v.shape.size());
    for (size_t d = 0; fits && d < v.shape.size(); ++d)
      fits = v.shape[d] < 0 || v.shape[d] == inputs[i].size(int64_t(d));
    ZENITH_CHECK(fits, "[onnx] input '", v.name, "' expects ", shape_str(v.shape),
                 " (-1: any), got ", shape_str(inputs[i].shape()));
    values[v.name] = inputs[i];
  }
  for (const auto& [name, t] : graph_.initializers) values[name] = t;
  for (const OnnxNode& n : graph_.nodes) {
    Inputs in;
    for (const std::string& name : n.inputs) in.push_back(name.empty() ? Tensor() : values[name]);
    values[n.outputs[0]] = op_table().at(n.op_type)(n, in);
  }
  std::vector<Tensor> out;
  for (const auto& v : graph_.outputs) out.push_back(values[v.name]);
  return out;
}

nn::CellPtr onnx_cell(const std::string& path) {
  return std::make_shared<OnnxCell>(OnnxModel::load(path));
}

}  // namespace zenith::onnx
