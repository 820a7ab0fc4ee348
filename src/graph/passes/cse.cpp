// Common-subexpression elimination: a node equal to an earlier one (op, attributes, operands by
// value and view, no write to an operand in between) reuses the earlier node's outputs.
#include <unordered_map>

#include "graph/passes/passes.h"

namespace zenith::graph {
namespace {

bool same_operands(const Node& a, const Node& b) {
  if (a.inputs.size() != b.inputs.size()) return false;
  for (size_t k = 0; k < a.inputs.size(); ++k)
    if (a.inputs[k].value != b.inputs[k].value || !(a.inputs[k].view == b.inputs[k].view))
      return false;
  return true;
}

}  // namespace

int eliminate_common_subexpressions(Graph& g) {
  // Candidates by (op, first operand); versions count the writes each value has seen.
  std::vector<int> version(g.values.size(), 0);
  struct Seen {
    int node;
    std::vector<int> versions;
  };
  std::unordered_multimap<uint64_t, Seen> seen;
  std::vector<bool> removed(g.nodes.size(), false);
  int count = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    if (n.writes.empty() && !is_random(n.op)) {
      uint64_t key = uint64_t(n.op) * 1000003u;
      for (const Operand& in : n.inputs) key = key * 31u + uint64_t(in.value + 1);
      std::vector<int> versions;
      for (const Operand& in : n.inputs)
        versions.push_back(in.defined() ? version[size_t(in.value)] : 0);
      bool merged = false;
      auto [lo, hi] = seen.equal_range(key);
      for (auto it = lo; it != hi && !merged; ++it) {
        const Node& e = g.nodes[size_t(it->second.node)];
        if (e.op != n.op || it->second.versions != versions || !same_operands(e, n) ||
            !attrs_equal(n.op, e.attrs.get(), n.attrs.get()) ||
            e.outputs.size() != n.outputs.size())
          continue;
        for (size_t k = 0; k < n.outputs.size(); ++k) {
          if (n.outputs[k] == kNoValue) continue;
          if (e.outputs[k] == kNoValue) {
            merged = false;
            break;
          }
          merged = true;
        }
        if (!merged) continue;
        for (size_t k = 0; k < n.outputs.size(); ++k)
          if (n.outputs[k] != kNoValue) g.replace_value(n.outputs[k], e.outputs[k]);
      }
      if (merged) {
        removed[i] = true;
        ++count;
        continue;
      }
      seen.insert({key, {int(i), versions}});
    }
    for (int w : n.writes) version[size_t(n.inputs[size_t(w)].value)] += 1;
  }
  if (count) g.remove_nodes(removed);
  return count;
}

}  // namespace zenith::graph
