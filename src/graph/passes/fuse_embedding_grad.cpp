// A tied embedding's gradient: the output layer's weight gradient plus embedding_backward's
// [V, D] scatter of the token rows. Eager mode zero-fills [V, D], scatter-adds the rows, then
// adds the two [V, D] matrices; the fused op copies the output layer's gradient once and
// scatter-adds the rows into it:
//   e = embedding_backward(dy, ids); g = add(base, e)  ->  g = embedding_backward_add(dy, ids,
//   base)
#include "graph/passes/pass_utils.h"
#include "graph/passes/passes.h"

namespace zenith::graph {

int fuse_embedding_grad(Graph& g, FusionCounts& counts) {
  auto [readers, writers, keep, removed] = PassScan(g);
  int count = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const int j = sole_add_reader(g, readers, keep, i, OpId::embedding_backward, 2, 1);
    if (j < 0) continue;
    const Node& eb = g.nodes[i];
    const ValueId e = eb.outputs[0];
    Node& add = g.nodes[size_t(j)];
    if (add.inputs.size() != 2 || !add.writes.empty() || add.segment != eb.segment ||
        add.outputs.size() != 1)
      continue;
    const View& def = g.values[size_t(e)].def;
    const int mine = add.inputs[0].value == e ? 0 : 1;
    const Operand& base = add.inputs[size_t(1 - mine)];
    // Both addends [V, D] as they are (no broadcast), one dtype, e read as a whole.
    if (!(add.inputs[size_t(mine)].view == def) || base.value == e || base.view.layout ||
        base.view.shape != def.shape || base.view.dtype != def.dtype ||
        g.values[size_t(add.outputs[0])].def.dtype != def.dtype)
      continue;
    if (written_between(writers, eb.inputs[0].value, int(i), j) ||
        written_between(writers, eb.inputs[1].value, int(i), j))
      continue;
    add.op = OpId::embedding_backward_add;
    add.attrs = eb.attrs;  // EmbeddingBackwardAttrs
    add.inputs = {eb.inputs[0], eb.inputs[1], base};
    add.fused = "embedding grad+add";
    removed[i] = true;
    ++count;
  }
  if (count) g.remove_nodes(removed);
  counts["embedding grad+add"] += count;
  return count;
}

}  // namespace zenith::graph
