#include "graph/peak_live.h"

#include <algorithm>
#include <map>

namespace zenith::graph {

const char* value_role(const Graph& g, ValueId v, const std::vector<std::vector<int>>& readers) {
  for (const auto& [state, b] : g.grads)
    if (b.operand.value == v) return "parameter gradient";
  for (const auto& seg : g.segment_outputs)
    for (const auto& b : seg)
      if (b.operand.value == v) return "step output";
  const Value& val = g.values[size_t(v)];
  const int made = val.producer >= 0 ? g.nodes[size_t(val.producer)].segment : 0;
  int last = made;
  for (int r : readers[size_t(v)]) {
    const Node& n = g.nodes[size_t(r)];
    // An optimizer update reads the gradient it applies.
    if (std::string(op_name(n.op)).find("_update") != std::string::npos &&
        std::find(n.writes.begin(), n.writes.end(), 0) != n.writes.end())
      for (size_t k = 0; k < n.inputs.size(); ++k)
        if (n.inputs[k].value == v &&
            std::find(n.writes.begin(), n.writes.end(), int(k)) == n.writes.end())
          return "parameter gradient";
    last = std::max(last, n.segment);
  }
  if (made == 0) return last > 0 ? "saved for backward" : "forward temporary";
  return "activation gradient or temporary";
}

std::vector<LiveGroup> live_at_peak_groups(const Graph& g, std::string* peak_op) {
  int node = -1;
  const std::vector<ValueId> live = g.live_at_peak(&node);
  if (peak_op)
    *peak_op = node < 0 ? ""
                        : std::string(op_name(g.nodes[size_t(node)].op)) + " (node " +
                              std::to_string(node) + ")";
  const auto readers = g.readers();
  std::map<std::pair<std::string, std::string>, LiveGroup> groups;
  for (ValueId v : live) {
    const Value& val = g.values[size_t(v)];
    const Node& by = g.nodes[size_t(val.producer)];
    const std::string op = by.fused.empty() ? op_name(by.op) : by.fused;
    const std::string role = value_role(g, v, readers);
    LiveGroup& grp = groups[{op, role}];
    grp.op = op;
    grp.role = role;
    grp.bytes += val.nbytes;
    grp.buffers += 1;
  }
  std::vector<LiveGroup> out;
  for (auto& [key, grp] : groups) out.push_back(grp);
  std::stable_sort(out.begin(), out.end(),
                   [](const LiveGroup& a, const LiveGroup& b) { return a.bytes > b.bytes; });
  return out;
}

}  // namespace zenith::graph
