// Elementwise fusion: groups of elementwise nodes over one shape become one fused_elementwise
// node, a program the CPU runs in one vectorised loop (backend/cpu/fused_elementwise.cpp).
// Groups grow in node order: a node joins the groups that made its inputs, provided the merged
// node can sit where it is (nothing before it reads a member's output; nothing between a
// member and it writes a member's input) and the operands fit the loop (the group's shape, a
// one-element scalar, or a trailing-dims broadcast; one oneDNN format at most). A full sum of a
// group's result that nothing else reads joins as the loop's reduction.
#include <algorithm>
#include <set>

#include "core/dispatch.h"
#include "graph/passes/passes.h"

namespace zenith::graph {
namespace {

bool is_elementwise(OpId op) {
  switch (op) {
    case OpId::neg:
    case OpId::abs:
    case OpId::square:
    case OpId::relu:
    case OpId::exp:
    case OpId::log:
    case OpId::sqrt:
    case OpId::rsqrt:
    case OpId::tanh:
    case OpId::sigmoid:
    case OpId::silu:
    case OpId::gelu:
    case OpId::gelu_tanh:
    case OpId::erf:
    case OpId::pow_scalar:
    case OpId::add:
    case OpId::sub:
    case OpId::mul:
    case OpId::div:
    case OpId::maximum:
    case OpId::minimum:
    case OpId::relu_backward:
      return true;
    default:
      return false;
  }
}

bool trailing_broadcast(const Shape& s_in, const Shape& shape) {
  Shape s = s_in;
  while (!s.empty() && s.front() == 1) s.erase(s.begin());
  if (s.size() > shape.size()) return false;
  return std::equal(s.begin(), s.end(), shape.end() - int64_t(s.size()));
}

// How an operand enters the loop over `shape`: 0 no, 1 full, 2 scalar, 3 broadcast.
int operand_kind(const View& v, const Shape& shape) {
  const bool contiguous = v.layout || v.strides == contiguous_strides(v.shape);
  if (!contiguous) return 0;
  if (v.shape == shape) return 1;
  if (shape_numel(v.shape) == 1) return 2;
  if (!v.layout && trailing_broadcast(v.shape, shape)) return 3;
  return 0;
}

struct Group {
  std::vector<int> members;  // node indices, ascending
  Shape shape;
  DType dtype;
  int sum = -1;  // a sum node joined as the reduction
};

class ElementwiseFusion {
 public:
  explicit ElementwiseFusion(Graph& g)
      : g_(g), readers_(g.readers()), writers_(g.writers()), keep_(g.live_out()) {}

  int run(FusionCounts& counts) {
    group_of_.assign(g_.nodes.size(), -1);
    for (size_t i = 0; i < g_.nodes.size(); ++i) consider(int(i));
    for (size_t k = 0; k < groups_.size(); ++k) absorb_sum(groups_[k]);
    std::vector<bool> removed(g_.nodes.size(), false);
    int fused = 0;
    for (Group& grp : groups_) {
      if (grp.members.size() + (grp.sum >= 0) < 2) continue;
      if (emit(grp, removed)) ++fused;
    }
    if (fused) g_.remove_nodes(removed);
    counts["elementwise"] += fused;
    return fused;
  }

 private:
  bool candidate(const Node& n, Shape& shape, DType& dtype) const {
    if (!is_elementwise(n.op) || n.outputs.size() != 1 || n.outputs[0] == kNoValue) return false;
    const Value& out = g_.values[size_t(n.outputs[0])];
    if (out.def.dtype != DType::f32 && out.def.dtype != DType::f64) return false;
    shape = out.def.shape;
    dtype = out.def.dtype;
    for (const Operand& in : n.inputs)
      if (!in.defined() || in.view.dtype != dtype || operand_kind(in.view, shape) == 0)
        return false;
    return operand_kind(out.def, shape) == 1;
  }

  // The group's node would sit at `at`: every member output read outside the group is read
  // after `at`, and no member input is written between its member and `at`.
  bool placeable(const std::vector<int>& members, int at) const {
    std::set<int> in_group(members.begin(), members.end());
    for (int m : members) {
      const Node& n = g_.nodes[size_t(m)];
      for (ValueId o : n.outputs)
        for (int r : readers_[size_t(o)])
          if (!in_group.count(r) && r < at) return false;
      for (const Operand& in : n.inputs)
        for (int w : writers_[size_t(in.value)])
          if (w > m && w < at) return false;
    }
    return true;
  }

  // The loop runs on oneDNN's physical order (and returns that format) when every full input is
  // in one format or plain, at least one is blocked, and no input is a broadcast; otherwise all
  // of it is plain (as the elementwise kernels do it, backend/cpu/onednn_layout.h). A result
  // that was plain may come back blocked only where every reader takes blocked tensors.
  bool layouts_fit(const std::vector<int>& members, const std::set<ValueId>& outputs) const {
    std::set<ValueId> made;
    for (int m : members) made.insert(g_.nodes[size_t(m)].outputs[0]);
    std::set<std::string> formats;
    bool broadcast = false;
    for (int m : members) {
      const Shape& shape = g_.values[size_t(g_.nodes[size_t(m)].outputs[0])].def.shape;
      for (const Operand& in : g_.nodes[size_t(m)].inputs) {
        if (made.count(in.value)) continue;
        if (in.view.layout) formats.insert(in.view.layout->describe());
        if (operand_kind(in.view, shape) == 3) broadcast = true;
      }
    }
    const bool blocked = formats.size() == 1 && !broadcast;
    if (!blocked) return true;
    for (ValueId o : outputs) {
      if (g_.values[size_t(o)].def.layout) continue;
      if (keep_[size_t(o)]) return false;
      for (int r : readers_[size_t(o)])
        if (!std::count(members.begin(), members.end(), r) &&
            !dispatch::is_layout_aware(g_.nodes[size_t(r)].op))
          return false;
    }
    return true;
  }

  void consider(int i) {
    Shape shape;
    DType dtype;
    if (!candidate(g_.nodes[size_t(i)], shape, dtype)) return;
    std::set<int> joined;
    for (const Operand& in : g_.nodes[size_t(i)].inputs) {
      const Value& v = g_.values[size_t(in.value)];
      if (v.kind != ValueKind::kIntermediate || v.producer < 0) continue;
      int grp = group_of_[size_t(v.producer)];
      if (grp >= 0 && groups_[size_t(grp)].shape == shape && groups_[size_t(grp)].dtype == dtype &&
          in.view == v.def)
        joined.insert(grp);
    }
    std::vector<int> members = {i};
    for (int grp : joined)
      members.insert(members.end(), groups_[size_t(grp)].members.begin(),
                     groups_[size_t(grp)].members.end());
    std::sort(members.begin(), members.end());
    if (joined.empty() || !placeable(members, i)) {
      group_of_[size_t(i)] = int(groups_.size());
      groups_.push_back({{i}, shape, dtype});
      return;
    }
    int into = *joined.begin();
    for (int grp : joined)
      if (grp != into) groups_[size_t(grp)].members.clear();
    groups_[size_t(into)].members = members;
    for (int m : members) group_of_[size_t(m)] = into;
  }

  // A sum over every dim to a 0-d result, of a group output nothing else reads.
  void absorb_sum(Group& grp) {
    if (grp.members.empty()) return;
    const ValueId last = g_.nodes[size_t(grp.members.back())].outputs[0];
    if (keep_[size_t(last)] || readers_[size_t(last)].size() != 1) return;
    const int s = readers_[size_t(last)][0];
    const Node& n = g_.nodes[size_t(s)];
    if (n.op != OpId::sum || !(n.inputs[0].view == g_.values[size_t(last)].def)) return;
    const auto& a = n.get<OpId::sum>();
    if (!a.out_shape.empty() || int64_t(a.dims.size()) != int64_t(grp.shape.size())) return;
    std::vector<int> members = grp.members;
    members.push_back(s);
    if (!placeable(grp.members, s)) return;
    grp.sum = s;
  }

  // Emits the group's node; false (nothing changed) when its layouts do not fit the loop.
  bool emit(const Group& grp, std::vector<bool>& removed) {
    std::vector<int> members = grp.members;
    std::set<int> in_group(members.begin(), members.end());
    if (grp.sum >= 0) in_group.insert(grp.sum);
    std::set<ValueId> results;
    for (int m : members) {
      const ValueId v = g_.nodes[size_t(m)].outputs[0];
      bool outside = keep_[size_t(v)];
      for (int rd : readers_[size_t(v)]) outside = outside || !in_group.count(rd);
      if (outside) results.insert(v);
    }
    if (!layouts_fit(members, results)) return false;
    FusedElementwiseAttrs attrs;
    attrs.shape = grp.shape;
    // Inputs: operands not made inside the group, each (value, view) once.
    std::vector<Operand> inputs;
    std::vector<std::pair<ValueId, int64_t>> reg_of_value;  // member output -> register
    auto input_reg = [&](const Operand& o) -> int64_t {
      for (auto& [v, r] : reg_of_value)
        if (v == o.value) return r;
      for (size_t k = 0; k < inputs.size(); ++k)
        if (inputs[k].value == o.value && inputs[k].view == o.view) return int64_t(k);
      inputs.push_back(o);
      return int64_t(inputs.size() - 1);
    };
    // Registers of inputs come first, so collect every external operand before numbering.
    for (int m : members)
      for (const Operand& in : g_.nodes[size_t(m)].inputs) {
        const Value& v = g_.values[size_t(in.value)];
        if (v.kind == ValueKind::kIntermediate && v.producer >= 0 && in_group.count(v.producer))
          continue;
        input_reg(in);
      }
    attrs.num_inputs = int64_t(inputs.size());
    for (int m : members) {
      const Node& n = g_.nodes[size_t(m)];
      const int64_t dst = attrs.num_inputs + int64_t(reg_of_value.size());
      int64_t a = input_reg(n.inputs[0]);
      int64_t b = n.inputs.size() > 1 ? input_reg(n.inputs[1]) : -1;
      int64_t imm = 0;
      if (n.op == OpId::pow_scalar)
        imm = __builtin_bit_cast(int64_t, n.get<OpId::pow_scalar>().exponent);
      attrs.code.insert(attrs.code.end(), {int64_t(n.op), dst, a, b, imm});
      reg_of_value.push_back({n.outputs[0], dst});
    }
    // Outputs: member results read outside the group or needed after the step.
    Node fused;
    fused.op = OpId::fused_elementwise;
    fused.segment = g_.nodes[size_t(members.back())].segment;
    for (auto& [v, r] : reg_of_value) {
      bool outside = keep_[size_t(v)];
      for (int rd : readers_[size_t(v)]) outside = outside || !in_group.count(rd);
      if (!outside) continue;
      attrs.outputs.push_back(r);
      fused.outputs.push_back(v);
    }
    if (grp.sum >= 0) {
      attrs.outputs.push_back(reg_of_value.back().second);
      attrs.sum_last = true;
      fused.outputs.push_back(g_.nodes[size_t(grp.sum)].outputs[0]);
    }
    fused.inputs = std::move(inputs);
    std::string desc;
    for (int m : members)
      desc += std::string(desc.empty() ? "" : ",") + op_name(g_.nodes[size_t(m)].op);
    if (grp.sum >= 0) desc += ",sum";
    fused.fused = "elementwise(" + desc + ")";
    fused.attrs = copy_attrs(OpId::fused_elementwise, &attrs);
    const int at = grp.sum >= 0 ? grp.sum : members.back();
    for (int m : members) removed[size_t(m)] = m != at;
    if (grp.sum >= 0) removed[size_t(grp.sum)] = false;
    g_.nodes[size_t(at)] = std::move(fused);
    return true;
  }

  Graph& g_;
  std::vector<std::vector<int>> readers_, writers_;
  std::vector<bool> keep_;
  std::vector<int> group_of_;
  std::vector<Group> groups_;
};

}  // namespace

int fuse_elementwise(Graph& g, FusionCounts& counts) { return ElementwiseFusion(g).run(counts); }

}  // namespace zenith::graph
