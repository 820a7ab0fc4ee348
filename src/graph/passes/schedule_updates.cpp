// Optimizer updates in the backward (torchtune's optimizer_in_bwd): each parameter's update runs
// as soon as its gradient is final and nothing later reads what the update writes, instead of
// after the whole backward. A multi-tensor update splits into one per group of parameters that
// become ready at the same node (conv2d_backward_weights' weight and bias, ...), each still one
// kernel over its group. With the gradients not left in .grad (Options::update_in_backward),
// each gradient's buffer dies at its update, so the step never holds all gradients at once.
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

int schedule_updates_early(Graph& g) {
  // After each node index: the updates that move there (-1: before the first node).
  std::map<int, std::vector<Node>> after;
  std::vector<bool> moved(g.nodes.size(), false);
  int count = 0;
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
    for (const auto& [at, params] : groups) {
      Node part;
      part.op = u.op;
      part.segment = at >= 0 ? g.nodes[size_t(at)].segment : 0;
      part.fused = (u.fused.empty() ? std::string("optimizer") : u.fused) + " in backward";
      if (params.size() == size_t(n)) {
        part.attrs = u.attrs;
        part.inputs = u.inputs;
      } else {
        part.attrs = with_count(u, int64_t(params.size()));
        for (size_t s = 0; s < slots; ++s)
          for (int64_t k : params) part.inputs.push_back(u.inputs[s * size_t(n) + size_t(k)]);
      }
      part.writes = written_inputs(part.op, part.attrs.get(), part.inputs.size());
      after[at].push_back(std::move(part));
      ++count;
    }
  }
  if (count == 0) return 0;
  std::vector<Node> nodes;
  auto place = [&](int at) {
    auto it = after.find(at);
    if (it == after.end()) return;
    for (Node& part : it->second) nodes.push_back(std::move(part));
  };
  place(-1);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!moved[i]) nodes.push_back(std::move(g.nodes[i]));
    place(int(i));
  }
  g.nodes = std::move(nodes);
  g.remove_nodes(std::vector<bool>(g.nodes.size(), false));  // renumbers the producers
  return count;
}

}  // namespace zenith::graph
