// Dead-op elimination: a backward sweep marks the values something needs.
#include "graph/passes/passes.h"

namespace zenith::graph {

int eliminate_dead_ops(Graph& g) {
  std::vector<bool> needed = g.live_out();
  std::vector<bool> removed(g.nodes.size(), false);
  int count = 0;
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const Node& n = g.nodes[i];
    bool keep = is_random(n.op);  // a random op advances the generator for what follows
    for (ValueId o : n.outputs)
      if (o != kNoValue && needed[size_t(o)]) keep = true;
    for (int w : n.writes)
      if (needed[size_t(n.inputs[size_t(w)].value)]) keep = true;
    if (!keep) {
      removed[i] = true;
      ++count;
      continue;
    }
    for (const Operand& in : n.inputs)
      if (in.defined()) needed[size_t(in.value)] = true;
  }
  if (count) g.remove_nodes(removed);
  return count;
}

}  // namespace zenith::graph
