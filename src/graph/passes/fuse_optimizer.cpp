// The optimizer update across all parameters in one pass: the per-parameter momentum_update /
// adam_update nodes of a step that share hyperparameters and dtype become one multi-tensor node
// (one fork/join over every parameter's elements instead of one per parameter). The merged node
// sits at the last update; nothing in between may read or write what the updates touch.
#include <set>

#include "graph/passes/passes.h"

namespace zenith::graph {
namespace {

// Hyperparameters as the multi-tensor attributes, or false when `n` is not an update.
bool multi_attrs(const Node& n, size_t count, std::shared_ptr<const void>& out, OpId& op) {
  if (n.op == OpId::momentum_update) {
    const auto& a = n.get<OpId::momentum_update>();
    MultiMomentumUpdateAttrs m{int64_t(count), a.lr, a.momentum, a.weight_decay, a.nesterov};
    out = copy_attrs(OpId::multi_momentum_update, &m);
    op = OpId::multi_momentum_update;
    return true;
  }
  if (n.op == OpId::adam_update) {
    const auto& a = n.get<OpId::adam_update>();
    MultiAdamUpdateAttrs m{int64_t(count), a.lr,           a.beta1,     a.beta2,
                           a.eps,          a.weight_decay, a.decoupled, a.step};
    out = copy_attrs(OpId::multi_adam_update, &m);
    op = OpId::multi_adam_update;
    return true;
  }
  return false;
}

}  // namespace

int fuse_optimizer_updates(Graph& g, FusionCounts& counts) {
  std::vector<bool> removed(g.nodes.size(), false);
  int fused = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& first = g.nodes[i];
    if ((first.op != OpId::momentum_update && first.op != OpId::adam_update) || removed[i])
      continue;
    const bool velocity = first.op == OpId::adam_update || first.inputs[2].defined();
    // Collect the following updates like it; stop at a node touching what they touch.
    std::vector<int> run = {int(i)};
    std::set<ValueId> touched;
    for (const Operand& in : first.inputs)
      if (in.defined()) touched.insert(in.value);
    for (size_t j = i + 1; j < g.nodes.size(); ++j) {
      const Node& n = g.nodes[j];
      bool same = n.op == first.op && n.segment == first.segment &&
                  attrs_equal(n.op, n.attrs.get(), first.attrs.get()) &&
                  n.inputs[0].view.dtype == first.inputs[0].view.dtype &&
                  (first.op == OpId::adam_update || n.inputs[2].defined() == velocity);
      bool touches = false;
      for (const Operand& in : n.inputs)
        touches = touches || (in.defined() && touched.count(in.value));
      if (same && !touches) {
        run.push_back(int(j));
        for (const Operand& in : n.inputs)
          if (in.defined()) touched.insert(in.value);
        continue;
      }
      if (touches) break;
      for (ValueId o : n.outputs)
        if (o != kNoValue && touched.count(o)) touches = true;
      if (touches) break;
    }
    if (run.size() < 2) continue;
    const size_t n = run.size();
    const int slots = first.op == OpId::adam_update ? 4 : (velocity ? 3 : 2);
    Node merged;
    if (!multi_attrs(first, n, merged.attrs, merged.op)) continue;
    merged.segment = first.segment;
    merged.fused = "optimizer x" + std::to_string(n);
    for (int s = 0; s < slots; ++s)
      for (int k : run) merged.inputs.push_back(g.nodes[size_t(k)].inputs[size_t(s)]);
    merged.writes = written_inputs(merged.op, merged.attrs.get(), merged.inputs.size());
    for (size_t k = 0; k + 1 < n; ++k) removed[size_t(run[k])] = true;
    g.nodes[size_t(run.back())] = std::move(merged);
    ++fused;
  }
  if (fused) g.remove_nodes(removed);
  counts["optimizer"] += fused;
  return fused;
}

}  // namespace zenith::graph
