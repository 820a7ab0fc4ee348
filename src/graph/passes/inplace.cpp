// In-place reuse: a copy whose source buffer dies at the copy is that buffer. Eager mode copies
// because it cannot know nothing else will read or write the source (autograd's clone of each
// gradient before it lands in .grad, contiguous() on a fresh result); the graph knows.
#include "graph/passes/passes.h"

namespace zenith::graph {
namespace {

bool plain_contiguous(const View& v) {
  return !v.layout && v.strides == contiguous_strides(v.shape);
}

}  // namespace

int reuse_in_place(Graph& g) {
  int count = 0;
  for (;;) {
    auto readers = g.readers();
    auto writers = g.writers();
    auto keep = g.live_out();
    int found = -1;
    for (size_t i = 0; i < g.nodes.size() && found < 0; ++i) {
      const Node& n = g.nodes[i];
      if (n.op != OpId::copy || n.outputs.empty() || n.outputs[0] == kNoValue) continue;
      const Operand& in = n.inputs[0];
      if (!in.defined() || n.get<OpId::copy>().dtype != in.view.dtype) continue;
      if (!plain_contiguous(in.view) || !plain_contiguous(g.values[size_t(n.outputs[0])].def))
        continue;
      const Value& src = g.values[size_t(in.value)];
      if (src.kind != ValueKind::kIntermediate || keep[size_t(in.value)]) continue;
      if (readers[size_t(in.value)].back() != int(i) || !writers[size_t(in.value)].empty())
        continue;
      found = int(i);
    }
    if (found < 0) break;
    const Node& n = g.nodes[size_t(found)];
    const ValueId out = n.outputs[0];
    const Operand src = n.inputs[0];
    auto retarget = [&](Operand& o) {
      if (o.value != out) return;
      o.value = src.value;
      o.view.offset += src.view.offset;
    };
    for (auto& node : g.nodes)
      for (auto& o : node.inputs) retarget(o);
    for (auto& seg : g.segment_outputs)
      for (auto& b : seg) retarget(b.operand);
    for (auto& [state, b] : g.grads) retarget(b.operand);
    std::vector<bool> removed(g.nodes.size(), false);
    removed[size_t(found)] = true;
    g.remove_nodes(removed);
    ++count;
  }
  return count;
}

}  // namespace zenith::graph
