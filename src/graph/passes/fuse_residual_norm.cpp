// Residual add + RMSNorm fusion, forward and backward (a pre-norm transformer's residual stream):
//   s = add(a, b); y, rstd = rms_norm(s, w)            -> s, y, rstd = add_rms_norm(a, b, w)
//   dx, dw = rms_norm_backward(dy, x, w, rstd); add(dx, dres) -> rms_norm_add_backward(..., dres)
// Each row is summed and normalised (or its gradient formed and the residual's added) in one pass
// while it is in cache. Only float32/float64 operands of one dtype and shape (the fused kernels'
// types) are fused; others stay as they are.
#include "graph/passes/pass_utils.h"
#include "graph/passes/passes.h"

namespace zenith::graph {
namespace {

bool fusable_dtype(DType t) { return t == DType::f32 || t == DType::f64; }

// The weight operand of a norm: undefined, or of the normalised values' dtype.
bool weight_ok(const Operand& w, DType dtype) { return !w.defined() || w.view.dtype == dtype; }

// add(a, b) over one shape and dtype, not in place: the add node's shape and dtype, else false.
bool plain_add(const Graph& g, const Node& n, Shape& shape, DType& dtype) {
  if (n.op != OpId::add || n.inputs.size() != 2 || n.outputs.size() != 1 || !n.writes.empty() ||
      n.outputs[0] == kNoValue)
    return false;
  const View& out = g.values[size_t(n.outputs[0])].def;
  shape = out.shape;
  dtype = out.dtype;
  return fusable_dtype(dtype) && whole(g, n.inputs[0], shape, dtype) &&
         whole(g, n.inputs[1], shape, dtype);
}

// add + rms_norm -> add_rms_norm at the add's place: the norm reads the sum as a whole and
// nothing writes the sum or the weight in between.
int fuse_forward(Graph& g) {
  auto readers = g.readers();
  auto writers = g.writers();
  std::vector<bool> removed(g.nodes.size(), false);
  int count = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& add = g.nodes[i];
    Shape shape;
    DType dtype;
    if (!plain_add(g, add, shape, dtype)) continue;
    const ValueId s = add.outputs[0];
    int norm = -1;
    for (int r : readers[size_t(s)]) {
      const Node& n = g.nodes[size_t(r)];
      if (n.op == OpId::rms_norm && !removed[size_t(r)] && n.inputs.size() == 2 &&
          n.inputs[0].value == s && n.inputs[1].value != s && n.segment == add.segment) {
        norm = r;
        break;
      }
    }
    if (norm < 0) continue;
    Node& n = g.nodes[size_t(norm)];
    if (!whole(g, n.inputs[0], shape, dtype) || !weight_ok(n.inputs[1], dtype) ||
        n.outputs.size() != 2 || written_between(writers, s, int(i), norm) ||
        written_between(writers, n.inputs[1].value, int(i), norm))
      continue;
    add.op = OpId::add_rms_norm;
    add.attrs = n.attrs;  // LayerNormAttrs
    add.inputs.push_back(n.inputs[1]);
    add.outputs = {s, n.outputs[0], n.outputs[1]};
    add.fused = "add+rmsnorm";
    removed[size_t(norm)] = true;
    ++count;
  }
  if (count) g.remove_nodes(removed);
  return count;
}

// rms_norm_backward whose dx only an add reads -> rms_norm_add_backward at the add's place:
// nothing writes the norm's inputs in between, and nothing reads its dweight before.
int fuse_backward(Graph& g) {
  auto [readers, writers, keep, removed] = PassScan(g);
  int count = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const int j = sole_add_reader(g, readers, keep, i, OpId::rms_norm_backward, 4, 2);
    if (j < 0) continue;
    const Node& nb = g.nodes[i];
    const ValueId dx = nb.outputs[0];
    Node& add = g.nodes[size_t(j)];
    Shape shape;
    DType dtype;
    if (!plain_add(g, add, shape, dtype) || add.segment != nb.segment) continue;
    const int mine = add.inputs[0].value == dx ? 0 : 1;
    const Operand& res = add.inputs[size_t(1 - mine)];
    if (add.inputs[size_t(mine)].value != dx || res.value == dx) continue;
    if (!whole(g, nb.inputs[0], shape, dtype) || !whole(g, nb.inputs[1], shape, dtype) ||
        !weight_ok(nb.inputs[2], dtype))
      continue;
    bool moved_ok = true;
    for (const Operand& o : nb.inputs)
      moved_ok = moved_ok && !written_between(writers, o.value, int(i), j);
    const ValueId dw = nb.outputs[1];
    if (dw != kNoValue)
      for (int r : readers[size_t(dw)]) moved_ok = moved_ok && r > j;
    if (!moved_ok) continue;
    std::vector<Operand> in = nb.inputs;
    in.push_back(res);
    const ValueId out = add.outputs[0];
    add.op = OpId::rms_norm_add_backward;
    add.attrs = nb.attrs;  // LayerNormAttrs
    add.inputs = std::move(in);
    add.outputs = {out, dw};
    add.fused = "rmsnorm backward+add";
    removed[i] = true;
    ++count;
  }
  if (count) g.remove_nodes(removed);
  return count;
}

}  // namespace

int fuse_residual_norm(Graph& g, FusionCounts& counts) {
  const int forward = fuse_forward(g);
  const int backward = fuse_backward(g);
  counts["add+rmsnorm"] += forward;
  counts["rmsnorm backward+add"] += backward;
  return forward + backward;
}

}  // namespace zenith::graph
