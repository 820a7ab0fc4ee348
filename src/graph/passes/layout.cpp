// Layout propagation. Eager mode already keeps oneDNN's blocked activations between
// consecutive oneDNN ops (layout-aware kernels take them as they are); what a captured graph can
// still hold is a to_plain of a tensor that is already plain (the kernel returns it unchanged)
// and several conversions of one blocked tensor. The first goes; the others become one, placed at
// the first, so each blocked value is converted once.
#include "graph/passes/passes.h"

namespace zenith::graph {

int propagate_layouts(Graph& g) {
  std::vector<bool> removed(g.nodes.size(), false);
  std::vector<int> converted(g.values.size(), -1);  // value -> its to_plain node
  auto writers = g.writers();
  int count = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    if (n.op != OpId::to_plain || !n.inputs[0].defined()) continue;
    const Operand& in = n.inputs[0];
    const ValueId out = n.outputs.empty() ? kNoValue : n.outputs[0];
    if (!in.view.layout) {
      // On a plain tensor: either the input itself came back (capture recorded no output and
      // readers read the input) or a contiguous copy was made, which is a real conversion.
      if (out == kNoValue) {
        removed[i] = true;
        ++count;
      }
      continue;
    }
    int& first = converted[size_t(in.value)];
    if (first >= 0 && writers[size_t(in.value)].empty() && out != kNoValue) {
      const Node& f = g.nodes[size_t(first)];
      if (f.inputs[0].view == in.view && !f.outputs.empty() && f.outputs[0] != kNoValue) {
        g.replace_value(out, f.outputs[0]);
        removed[i] = true;
        ++count;
        continue;
      }
    }
    if (first < 0) first = int(i);
  }
  if (count) g.remove_nodes(removed);
  return count;
}

}  // namespace zenith::graph
