// The ONNX graph's lookups and its one pass: BatchNormalization folded into the Conv before it.
#include "onnx/onnx_graph.h"

#include <cmath>
#include <set>

namespace zenith::onnx {

int64_t OnnxNode::int_attr(const std::string& key, int64_t fallback) const {
  auto it = attrs.find(key);
  if (it == attrs.end()) return fallback;
  ZENITH_CHECK(std::holds_alternative<int64_t>(it->second), "[onnx] ", op_type, " node '", name,
               "': attribute ", key, " is not an int");
  return std::get<int64_t>(it->second);
}

float OnnxNode::float_attr(const std::string& key, float fallback) const {
  auto it = attrs.find(key);
  if (it == attrs.end()) return fallback;
  ZENITH_CHECK(std::holds_alternative<float>(it->second), "[onnx] ", op_type, " node '", name,
               "': attribute ", key, " is not a float");
  return std::get<float>(it->second);
}

std::vector<int64_t> OnnxNode::ints_attr(const std::string& key,
                                         std::vector<int64_t> fallback) const {
  auto it = attrs.find(key);
  if (it == attrs.end()) return fallback;
  ZENITH_CHECK(std::holds_alternative<std::vector<int64_t>>(it->second), "[onnx] ", op_type,
               " node '", name, "': attribute ", key, " is not a list of ints");
  return std::get<std::vector<int64_t>>(it->second);
}

std::string OnnxNode::string_attr(const std::string& key, const std::string& fallback) const {
  auto it = attrs.find(key);
  if (it == attrs.end()) return fallback;
  ZENITH_CHECK(std::holds_alternative<std::string>(it->second), "[onnx] ", op_type, " node '", name,
               "': attribute ", key, " is not a string");
  return std::get<std::string>(it->second);
}

const Tensor* OnnxGraph::initializer(const std::string& value) const {
  for (const auto& [n, t] : initializers)
    if (n == value) return &t;
  return nullptr;
}

std::vector<const OnnxNode*> OnnxGraph::consumers(const std::string& value) const {
  std::vector<const OnnxNode*> out;
  for (const OnnxNode& n : nodes)
    for (const std::string& in : n.inputs)
      if (in == value) {
        out.push_back(&n);
        break;
      }
  return out;
}

std::map<std::string, int64_t> OnnxGraph::op_counts() const {
  std::map<std::string, int64_t> counts;
  for (const OnnxNode& n : nodes) counts[n.op_type] += 1;
  return counts;
}

namespace {

bool is_output(const OnnxGraph& g, const std::string& value) {
  for (const OnnxValue& o : g.outputs)
    if (o.name == value) return true;
  return false;
}

std::vector<double> values(const Tensor& t) { return t.to_double_vector(); }

void set_initializer(OnnxGraph& g, const std::string& name, Tensor value) {
  for (auto& [n, t] : g.initializers)
    if (n == name) {
      t = std::move(value);
      return;
    }
  g.initializers.emplace_back(name, std::move(value));
}

// Conv `conv` followed by BatchNormalization `bn` becomes one Conv with bn's output.
bool fold_into_conv(OnnxGraph& g, OnnxNode& conv, const OnnxNode& bn) {
  const Tensor* w = g.initializer(conv.inputs[1]);
  const Tensor* b =
      conv.inputs.size() > 2 && !conv.inputs[2].empty() ? g.initializer(conv.inputs[2]) : nullptr;
  const Tensor *gamma = g.initializer(bn.inputs[1]), *beta = g.initializer(bn.inputs[2]),
               *mean = g.initializer(bn.inputs[3]), *var = g.initializer(bn.inputs[4]);
  if (!w || !gamma || !beta || !mean || !var) return false;
  if (conv.inputs.size() > 2 && !conv.inputs[2].empty() && !b) return false;
  // The conv's weight and bias change: they must be this conv's alone.
  if (g.consumers(conv.inputs[1]).size() != 1) return false;
  if (b && g.consumers(conv.inputs[2]).size() != 1) return false;
  const int64_t out_channels = w->size(0);
  const double eps = bn.float_attr("epsilon", 1e-5f);
  const auto wv = values(*w), gv = values(*gamma), betav = values(*beta), mv = values(*mean),
             vv = values(*var);
  const std::vector<double> bv = b ? values(*b) : std::vector<double>(size_t(out_channels), 0.0);
  const int64_t per_channel = w->numel() / out_channels;
  std::vector<float> folded_w(wv.size()), folded_b(static_cast<size_t>(out_channels));
  for (int64_t o = 0; o < out_channels; ++o) {
    const double scale = gv[size_t(o)] / std::sqrt(vv[size_t(o)] + eps);
    for (int64_t i = 0; i < per_channel; ++i)
      folded_w[size_t(o * per_channel + i)] = float(wv[size_t(o * per_channel + i)] * scale);
    folded_b[size_t(o)] = float((bv[size_t(o)] - mv[size_t(o)]) * scale + betav[size_t(o)]);
  }
  set_initializer(g, conv.inputs[1], Tensor::from_vector(folded_w, w->shape()));
  std::string bias_name = b ? conv.inputs[2] : conv.inputs[1] + ".folded_bias";
  set_initializer(g, bias_name, Tensor::from_vector(folded_b, {out_channels}));
  conv.inputs.resize(3);
  conv.inputs[2] = bias_name;
  conv.outputs[0] = bn.outputs[0];
  return true;
}

void drop_unused_initializers(OnnxGraph& g) {
  std::set<std::string> used;
  for (const OnnxNode& n : g.nodes) used.insert(n.inputs.begin(), n.inputs.end());
  for (const OnnxValue& o : g.outputs) used.insert(o.name);
  std::erase_if(g.initializers, [&](const auto& init) { return !used.count(init.first); });
}

}  // namespace

int fold_batch_norms(OnnxGraph& g) {
  int folded = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const OnnxNode& bn = g.nodes[i];
    if (bn.op_type != "BatchNormalization" || bn.inputs.size() < 5) continue;
    const std::string& x = bn.inputs[0];
    if (g.consumers(x).size() != 1 || is_output(g, x)) continue;
    OnnxNode* conv = nullptr;
    for (OnnxNode& n : g.nodes)
      if (n.op_type == "Conv" && n.outputs.size() == 1 && n.outputs[0] == x) conv = &n;
    if (!conv || !fold_into_conv(g, *conv, bn)) continue;
    g.nodes.erase(g.nodes.begin() + std::ptrdiff_t(i));
    --i;
    ++folded;
  }
  drop_unused_initializers(g);
  return folded;
}

}  // namespace zenith::onnx
