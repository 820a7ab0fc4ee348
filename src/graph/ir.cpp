#include "graph/ir.h"

#include <algorithm>
#include <sstream>

namespace zenith::graph {

const char* value_kind_name(ValueKind kind) {
  switch (kind) {
    case ValueKind::kInput:
      return "input";
    case ValueKind::kState:
      return "state";
    case ValueKind::kConstant:
      return "constant";
    case ValueKind::kIntermediate:
      return "intermediate";
  }
  return "?";
}

View View::of(const Tensor& t) {
  const TensorImpl& impl = t.impl();
  return {impl.shape, impl.strides, impl.offset, impl.dtype, impl.layout};
}

AttrsPtr copy_attrs(OpId op, const void* attrs) {
  switch (op) {
#define ZENITH_OP(name, Attrs) \
  case OpId::name:             \
    return std::make_shared<const Attrs>(*static_cast<const Attrs*>(attrs));
#include "core/ops.def"
#undef ZENITH_OP
  }
  ZENITH_FAIL("[graph] unknown op id ", int(op));
}

bool attrs_equal(OpId op, const void* a, const void* b) {
  switch (op) {
#define ZENITH_OP(name, Attrs) \
  case OpId::name:             \
    return *static_cast<const Attrs*>(a) == *static_cast<const Attrs*>(b);
#include "core/ops.def"
#undef ZENITH_OP
  }
  return false;
}

std::vector<int> written_inputs(OpId op, const void* attrs, size_t num_inputs) {
  switch (op) {
    case OpId::copy_:
    case OpId::fill_:
      return {0};
    case OpId::momentum_update:
      return num_inputs > 2 ? std::vector<int>{0, 2} : std::vector<int>{0};
    case OpId::adam_update:
      return {0, 2, 3};
    case OpId::multi_momentum_update: {
      // params, grads, velocities (optional), n each
      const auto& a = *static_cast<const MultiMomentumUpdateAttrs*>(attrs);
      std::vector<int> w;
      for (int64_t i = 0; i < a.count; ++i) w.push_back(int(i));
      if (num_inputs == size_t(3 * a.count))
        for (int64_t i = 0; i < a.count; ++i) w.push_back(int(2 * a.count + i));
      return w;
    }
    case OpId::multi_adam_update: {
      const auto& a = *static_cast<const MultiAdamUpdateAttrs*>(attrs);
      std::vector<int> w;
      for (int64_t i = 0; i < a.count; ++i) w.push_back(int(i));
      for (int64_t i = 2 * a.count; i < 4 * a.count; ++i) w.push_back(int(i));
      return w;
    }
    case OpId::batch_norm:
    case OpId::batch_norm_relu: {
      const auto& a = *static_cast<const BatchNormAttrs*>(attrs);
      if (a.training && num_inputs >= 5) return {3, 4};
      return {};
    }
    default:
      return {};
  }
}

bool is_random(OpId op) { return op == OpId::dropout; }

ValueId Graph::add_value(Value v) {
  values.push_back(std::move(v));
  return ValueId(values.size() - 1);
}

void Graph::replace_value(ValueId from, ValueId to) {
  const View& old_def = values[size_t(from)].def;
  const View& new_def = values[size_t(to)].def;
  auto fix = [&](Operand& o) {
    if (o.value != from) return;
    o.value = to;
    if (o.view == old_def)
      o.view = new_def;
    else if (o.view.layout)
      o.view.layout = new_def.layout;
  };
  for (auto& n : nodes)
    for (auto& in : n.inputs) fix(in);
  for (auto& seg : segment_outputs)
    for (auto& b : seg) fix(b.operand);
  for (auto& [state, g] : grads) fix(g.operand);
}

void Graph::remove_nodes(const std::vector<bool>& removed) {
  std::vector<Node> kept;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (!removed[i]) kept.push_back(std::move(nodes[i]));
  nodes = std::move(kept);
  for (auto& v : values)
    if (v.kind == ValueKind::kIntermediate) v.producer = -1;
  for (size_t i = 0; i < nodes.size(); ++i)
    for (size_t k = 0; k < nodes[i].outputs.size(); ++k)
      if (nodes[i].outputs[k] != kNoValue) {
        values[size_t(nodes[i].outputs[k])].producer = int(i);
        values[size_t(nodes[i].outputs[k])].output_index = int(k);
      }
}

std::vector<std::vector<int>> Graph::writers() const {
  std::vector<std::vector<int>> w(values.size());
  for (size_t n = 0; n < nodes.size(); ++n)
    for (int k : nodes[n].writes) w[size_t(nodes[n].inputs[size_t(k)].value)].push_back(int(n));
  return w;
}

std::vector<std::vector<int>> Graph::readers() const {
  std::vector<std::vector<int>> r(values.size());
  for (size_t n = 0; n < nodes.size(); ++n)
    for (const auto& in : nodes[n].inputs)
      if (in.defined() && (r[size_t(in.value)].empty() || r[size_t(in.value)].back() != int(n)))
        r[size_t(in.value)].push_back(int(n));
  return r;
}

std::vector<bool> Graph::live_out() const {
  std::vector<bool> out(values.size(), false);
  for (size_t v = 0; v < values.size(); ++v) out[v] = values[v].kind != ValueKind::kIntermediate;
  for (const auto& seg : segment_outputs)
    for (const auto& b : seg) out[size_t(b.operand.value)] = true;
  for (const auto& [state, g] : grads) out[size_t(g.operand.value)] = true;
  return out;
}

std::map<std::string, int> Graph::op_counts() const {
  std::map<std::string, int> counts;
  for (const auto& n : nodes) counts[op_name(n.op)] += 1;
  return counts;
}

int Graph::count(OpId op) const {
  return int(std::count_if(nodes.begin(), nodes.end(), [&](const Node& n) { return n.op == op; }));
}

std::string Graph::dump() const {
  std::ostringstream os;
  auto operand = [&](const Operand& o) {
    if (!o.defined()) return std::string("_");
    const Value& v = values[size_t(o.value)];
    std::string s = "%" + std::to_string(o.value);
    if (v.kind != ValueKind::kIntermediate) s += std::string(":") + value_kind_name(v.kind)[0];
    return s;
  };
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    os << "[" << n.segment << "] ";
    for (size_t k = 0; k < n.outputs.size(); ++k)
      os << (k ? ", " : "")
         << (n.outputs[k] == kNoValue ? "_" : "%" + std::to_string(n.outputs[k]));
    os << (n.outputs.empty() ? "" : " = ") << op_name(n.op) << "(";
    for (size_t k = 0; k < n.inputs.size(); ++k) os << (k ? ", " : "") << operand(n.inputs[k]);
    os << ")";
    if (n.overwrites >= 0) os << "  # over " << operand(n.inputs[size_t(n.overwrites)]);
    if (!n.fused.empty()) os << "  # " << n.fused;
    os << "\n";
  }
  return os.str();
}

namespace {

// Walks the nodes in order with each intermediate alive from its producer to its last reader
// (values that outlive the step to the end); calls at(node, live bytes, alive) after each
// node's outputs are made, before the values it last reads die.
template <typename F>
void sweep_live(const Graph& g, F&& at) {
  auto r = g.readers();
  auto keep = g.live_out();
  std::vector<std::vector<ValueId>> dies(g.nodes.size());
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (g.values[v].kind != ValueKind::kIntermediate || keep[v]) continue;
    int last = r[v].empty() ? g.values[v].producer : r[v].back();
    if (last >= 0) dies[size_t(last)].push_back(ValueId(v));
  }
  std::vector<bool> alive(g.values.size(), false);
  size_t live = 0;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const Node& node = g.nodes[n];
    const ValueId over = node.overwrites >= 0 ? node.inputs[size_t(node.overwrites)].value : -1;
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      const ValueId o = node.outputs[k];
      if (o == kNoValue) continue;
      alive[size_t(o)] = true;
      if (k == 0 && over >= 0 && alive[size_t(over)]) {
        alive[size_t(over)] = false;  // its bytes are the output's now
        live -= g.values[size_t(over)].nbytes;
      }
      live += g.values[size_t(o)].nbytes;
    }
    at(int(n), live, alive);
    for (ValueId v : dies[n])
      if (alive[size_t(v)]) {
        alive[size_t(v)] = false;
        live -= g.values[size_t(v)].nbytes;
      }
  }
}

}  // namespace

size_t Graph::peak_intermediate_bytes() const {
  size_t peak = 0;
  sweep_live(*this,
             [&](int, size_t live, const std::vector<bool>&) { peak = std::max(peak, live); });
  return peak;
}

size_t Graph::peak_intermediate_bytes(const std::function<size_t(const Node&)>& workspace) const {
  size_t peak = 0;
  sweep_live(*this, [&](int n, size_t live, const std::vector<bool>&) {
    peak = std::max(peak, live + workspace(nodes[size_t(n)]));
  });
  return peak;
}

std::vector<ValueId> Graph::live_at_peak(int* node) const {
  size_t peak = 0;
  std::vector<ValueId> out;
  if (node) *node = -1;
  sweep_live(*this, [&](int n, size_t live, const std::vector<bool>& alive) {
    if (live <= peak && !out.empty()) return;
    peak = live;
    out.clear();
    for (size_t v = 0; v < alive.size(); ++v)
      if (alive[v]) out.push_back(ValueId(v));
    if (node) *node = n;
  });
  return out;
}

}  // namespace zenith::graph
