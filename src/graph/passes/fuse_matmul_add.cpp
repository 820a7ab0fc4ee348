// A gradient sum's matmul accumulating onto the sum so far: autograd adds the input gradients
// of a tensor read by several linears (LLaMA's q/k/v projections and gate/up read one normed x)
// as separate [M, D] products and adds; the product's gemm can add itself (beta = 1) onto the
// other addend, in place where that dies (write_over_dying_inputs):
//   p = matmul(a, b); s = add(c, p)  ->  s = matmul_add(a, b, c)
// The matmul's result must be read only by the add (as a whole, maybe reshaped), a and b 2-d,
// one float dtype, c the add's shape (no broadcast).
#include "graph/passes/pass_utils.h"
#include "graph/passes/passes.h"

namespace zenith::graph {

int fuse_matmul_add(Graph& g, FusionCounts& counts) {
  auto [readers, writers, keep, removed] = PassScan(g);
  int count = 0;
  for (size_t j = 0; j < g.nodes.size(); ++j) {
    Node& add = g.nodes[j];
    if (add.op != OpId::add || add.inputs.size() != 2 || add.outputs.size() != 1 ||
        add.outputs[0] == kNoValue || !add.writes.empty())
      continue;
    const View& out = g.values[size_t(add.outputs[0])].def;
    const DType dt = out.dtype;
    if (dt != DType::f32 && dt != DType::f64) continue;
    for (int mine : {1, 0}) {
      const Operand& p = add.inputs[size_t(mine)];
      const Operand& c = add.inputs[size_t(1 - mine)];
      if (!p.defined() || !c.defined() || p.value == c.value) continue;
      const Value& pv = g.values[size_t(p.value)];
      if (pv.kind != ValueKind::kIntermediate || pv.producer < 0 || keep[size_t(p.value)] ||
          readers[size_t(p.value)].size() != 1 || !writers[size_t(p.value)].empty())
        continue;
      const int i = pv.producer;
      const Node& mm = g.nodes[size_t(i)];
      if (mm.op != OpId::matmul || removed[size_t(i)] || mm.outputs.size() != 1 ||
          mm.segment != add.segment || mm.inputs.size() != 2)
        continue;
      const View& a = mm.inputs[0].view;
      const View& b = mm.inputs[1].view;
      if (a.shape.size() != 2 || b.shape.size() != 2 || a.dtype != dt || b.dtype != dt ||
          a.layout || b.layout)
        continue;
      // p read whole (maybe reshaped), c with the add's shape, the product's element count.
      if (!whole(g, p, p.view.shape, dt) || p.view.shape != out.shape ||
          c.view.shape != out.shape || c.view.dtype != dt || c.view.layout ||
          shape_numel(out.shape) != a.shape[0] * b.shape[1] || out.shape.empty() ||
          out.shape.back() != b.shape[1])
        continue;
      if (written_between(writers, mm.inputs[0].value, i, int(j)) ||
          written_between(writers, mm.inputs[1].value, i, int(j)))
        continue;
      add.op = OpId::matmul_add;
      add.inputs = {mm.inputs[0], mm.inputs[1], Operand(c)};
      add.fused = "matmul+add";
      removed[size_t(i)] = true;
      ++count;
      break;
    }
  }
  if (count) g.remove_nodes(removed);
  counts["matmul+add"] += count;
  return count;
}

}  // namespace zenith::graph
