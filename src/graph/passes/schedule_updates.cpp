// Optimizer updates in the backward (torchtune's optimizer_in_bwd), where they lower the step's
// peak memory: a parameter's update can run as soon as its gradient is final and nothing later
// reads what the update writes, instead of after the whole backward; with the gradients not
// left in .grad (Options::update_in_backward) its gradient's buffer then dies there. A
// multi-tensor update splits into one per group of parameters that become ready at the same
// node (conv2d_backward_weights' weight and bias, ...), each still one kernel over its group.
// Early costs time where it saves no memory: the updates' streams of parameters and moments
// evict the backward's operands between its GEMMs, and many small updates stream less well than
// one (stories15M's AdamW step is faster as one update after the backward than as 56 in it).
// So from all groups early (the least peak), each group,
// the latest ready first, goes back after the backward unless its gradients, alive until then,
// would raise that peak (the graph's intermediates as the later passes leave them, with the
// kernels' workspaces): ResNet-18 keeps 6 of its groups early, stories15M none (its peak is the
// output layer's, before any layer's gradient exists).
#include <algorithm>
#include <map>

#include "graph/passes/passes.h"

namespace zenith::graph {
namespace {

bool is_update(OpId op) {
  return op == OpId::momentum_update || op == OpId::adam_update ||
         op == OpId::multi_momentum_update || op == OpId::multi_adam_update;
}

// Parameters an update node covers (count of a multi-tensor update, else 1).
int64_t update_count(const Node& n) {
  if (n.op == OpId::multi_momentum_update) return n.get<OpId::multi_momentum_update>().count;
  if (n.op == OpId::multi_adam_update) return n.get<OpId::multi_adam_update>().count;
  return 1;
}

// The update's attributes for `count` of its parameters.
AttrsPtr with_count(const Node& n, int64_t count) {
  if (n.op == OpId::multi_momentum_update) {
    MultiMomentumUpdateAttrs a = n.get<OpId::multi_momentum_update>();
    a.count = count;
    return copy_attrs(n.op, &a);
  }
  MultiAdamUpdateAttrs a = n.get<OpId::multi_adam_update>();
  a.count = count;
  return copy_attrs(n.op, &a);
}

}  // namespace

// Bytes a kernel holds while it runs beyond its outputs, where that is large enough to set a
// step's peak: the CPU kernel of linear_cross_entropy_grads keeps the exps of a block of up to
// 256 rows for every class ([V, min(M, 256)], src/backend/cpu/loss.cpp), 16 MB for stories15M
// at 128 rows, while no gradient of the layers exists yet.
size_t kernel_workspace_bytes(const Node& n) {
  if (n.op != OpId::linear_cross_entropy_grads || n.inputs.size() < 2) return 0;
  const View& x = n.inputs[0].view;
  const View& w = n.inputs[1].view;
  if (x.shape.size() != 2 || w.shape.size() != 2) return 0;
  return size_t(w.shape[0]) * size_t(std::min<int64_t>(x.shape[0], 256)) * itemsize(x.dtype);
}

namespace {

// One update's parameters that become ready at one node: placed right after `ready` (in the
// backward) or after `end` (where the whole update was).
struct Part {
  size_t update;  // the update node it comes from
  int ready, end;
  std::vector<int64_t> params;
  bool early = true;
};

// g's nodes with each update replaced by its parts, placed as they say.
std::vector<Node> placed(const Graph& g, const std::vector<Part>& parts,
                         const std::vector<bool>& moved) {
  std::map<int, std::vector<const Part*>> after;  // node index -> parts placed after it
  for (const Part& p : parts) after[p.early ? p.ready : p.end].push_back(&p);
  std::vector<Node> nodes;
  auto place = [&](int at) {
    auto it = after.find(at);
    if (it == after.end()) return;
    // Parts of one update placed at one node become one node again.
    std::map<size_t, std::vector<int64_t>> merged;
    for (const Part* p : it->second)
      merged[p->update].insert(merged[p->update].end(), p->params.begin(), p->params.end());
    for (auto& [m, params] : merged) {
      const Node& u = g.nodes[m];
      const int64_t n = update_count(u);
      const size_t slots = u.inputs.size() / size_t(n);
      std::sort(params.begin(), params.end());
      Node part;
      part.op = u.op;
      part.segment = at >= 0 ? g.nodes[size_t(at)].segment : 0;
      const bool early = at != int(m) - 1;
      part.fused = u.fused.empty() ? std::string("optimizer") : u.fused;
      if (early) part.fused += " in backward";
      if (params.size() == size_t(n)) {
        part.attrs = u.attrs;
        part.inputs = u.inputs;
      } else {
        part.attrs = with_count(u, int64_t(params.size()));
        for (size_t s = 0; s < slots; ++s)
          for (int64_t k : params) part.inputs.push_back(u.inputs[s * size_t(n) + size_t(k)]);
      }
      part.writes = written_inputs(part.op, part.attrs.get(), part.inputs.size());
      nodes.push_back(std::move(part));
    }
  };
  place(-1);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!moved[i]) nodes.push_back(g.nodes[i]);
    place(int(i));
  }
  return nodes;
}

size_t peak_of(const Graph& g, const std::vector<Part>& parts, const std::vector<bool>& moved) {
  Graph t;
  t.values = g.values;
  t.segments = g.segments;
  t.segment_outputs = g.segment_outputs;
  t.grads = g.grads;
  t.nodes = placed(g, parts, moved);
  t.remove_nodes(std::vector<bool>(t.nodes.size(), false));  // renumbers the producers
  // As the passes after this one leave it: outputs written over dying inputs.
  eliminate_dead_ops(t);
  write_over_dying_inputs(t);
  return t.peak_intermediate_bytes(kernel_workspace_bytes);
}

}  // namespace

int schedule_updates_early(Graph& g) {
  std::vector<Part> parts;
  std::vector<bool> moved(g.nodes.size(), false);
  for (size_t m = 0; m < g.nodes.size(); ++m) {
    const Node& u = g.nodes[m];
    if (!is_update(u.op)) continue;
    const int64_t n = update_count(u);
    const size_t slots = u.inputs.size() / size_t(n);
    // Per parameter: the last earlier node that makes, reads or writes any of its operands.
    auto ready_at = [&](int64_t k) {
      int last = -1;
      for (size_t s = 0; s < slots; ++s) {
        const Operand& o = u.inputs[s * size_t(n) + size_t(k)];
        if (!o.defined()) continue;
        for (size_t j = 0; j < m; ++j) {
          const Node& other = g.nodes[j];
          bool touches = false;
          for (const Operand& in : other.inputs) touches = touches || in.value == o.value;
          for (ValueId out : other.outputs) touches = touches || out == o.value;
          if (touches) last = std::max(last, int(j));  // the latest over all operands
        }
      }
      return last;
    };
    std::map<int, std::vector<int64_t>> groups;  // ready node -> parameters
    for (int64_t k = 0; k < n; ++k) groups[ready_at(k)].push_back(k);
    if (groups.size() == 1 && groups.begin()->first == int(m) - 1) continue;  // already there
    moved[m] = true;
    for (auto& [at, params] : groups) parts.push_back({m, at, int(m) - 1, std::move(params)});
  }
  if (parts.empty()) return 0;
  // Early only where that lowers the peak (above).
  const size_t peak = peak_of(g, parts, moved);
  std::vector<size_t> order(parts.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return parts[a].ready > parts[b].ready; });
  for (size_t i : order) {
    if (parts[i].ready == parts[i].end) {
      parts[i].early = false;
      continue;
    }
    parts[i].early = false;
    if (peak_of(g, parts, moved) > peak) parts[i].early = true;
  }
  int count = 0;
  for (const Part& p : parts) count += p.early;
  g.nodes = placed(g, parts, moved);
  g.remove_nodes(std::vector<bool>(g.nodes.size(), false));  // renumbers the producers
  return count;
}

}  // namespace zenith::graph
