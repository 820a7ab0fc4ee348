// A copy that only reorders the leading dims of a row-wise op's result goes into that op. RoPE's
// backward writes dq and dk as [B, H, T, D] (attention's layout) and autograd then copies each
// into [B, T, H, D] for the projection's gradient matmul (the backward of view + transpose):
//   y = rotary_embedding_backward(dy, cos, sin); c = copy(y.transpose(1, 2))
// ->  c = rotary_embedding_backward(dy.transpose(1, 2), cos.transpose(1, 2), sin.transpose(1, 2))
// Each row of D elements of such an op depends only on the same row of its inputs (broadcast
// over the leading dims), so reading every operand through the same permutation of the leading
// dims writes the rows in the copy's order, and the copy goes.
#include "graph/passes/pass_utils.h"
#include "graph/passes/passes.h"

namespace zenith::graph {
namespace {

bool row_wise(OpId op) {
  return op == OpId::rotary_embedding || op == OpId::rotary_embedding_backward;
}

// The permutation p of a contiguous buffer's dims that `view` reads it through (view dim k is
// the buffer's dim p[k]), the last dim left in place; empty if the view is not one.
std::vector<size_t> leading_permutation(const View& def, const View& view) {
  const size_t nd = def.shape.size();
  if (view.shape.size() != nd || nd < 2 || view.offset != 0 || view.layout ||
      view.dtype != def.dtype || view.shape.back() != def.shape.back() || view.strides.back() != 1)
    return {};
  const Shape ds = contiguous_strides(def.shape);
  std::vector<size_t> p(nd, nd);
  std::vector<bool> used(nd, false);
  p[nd - 1] = nd - 1;
  used[nd - 1] = true;
  // Dims longer than 1 by their stride (unique in a contiguous buffer), then the size-1 dims
  // (any stride) in order.
  for (size_t k = 0; k + 1 < nd; ++k) {
    if (view.shape[k] == 1) continue;
    for (size_t q = 0; q + 1 < nd; ++q)
      if (!used[q] && def.shape[q] == view.shape[k] && ds[q] == view.strides[k]) {
        p[k] = q;
        used[q] = true;
        break;
      }
    if (p[k] == nd) return {};
  }
  for (size_t k = 0; k + 1 < nd; ++k) {
    if (view.shape[k] != 1) continue;
    for (size_t q = 0; q + 1 < nd; ++q)
      if (!used[q] && def.shape[q] == 1) {
        p[k] = q;
        used[q] = true;
        break;
      }
    if (p[k] == nd) return {};
  }
  return p;
}

// An operand broadcast to `nd` dims (leading size-1 dims) and read through permutation p.
View permuted(const View& v, size_t nd, const std::vector<size_t>& p) {
  const size_t pad = nd - v.shape.size();
  Shape shape(nd, 1), strides(nd, 0);
  for (size_t k = 0; k < v.shape.size(); ++k) {
    shape[pad + k] = v.shape[k];
    strides[pad + k] = v.strides[k];
  }
  View out = v;
  out.shape.assign(nd, 1);
  out.strides.assign(nd, 0);
  for (size_t k = 0; k < nd; ++k) {
    out.shape[k] = shape[p[k]];
    out.strides[k] = strides[p[k]];
  }
  return out;
}

}  // namespace

int fold_transposing_copies(Graph& g, FusionCounts& counts) {
  auto [readers, writers, keep, removed] = PassScan(g);
  int count = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    if (!row_wise(n.op) || n.outputs.size() != 1 || n.outputs[0] == kNoValue || !n.writes.empty())
      continue;
    const ValueId y = n.outputs[0];
    const View& def = g.values[size_t(y)].def;
    if (!contiguous(def) || keep[size_t(y)] || readers[size_t(y)].size() != 1 ||
        !writers[size_t(y)].empty())
      continue;
    const int j = readers[size_t(y)][0];
    const Node& c = g.nodes[size_t(j)];
    if (c.op != OpId::copy || c.inputs.size() != 1 || c.inputs[0].value != y || !c.writes.empty() ||
        c.outputs.size() != 1 || c.outputs[0] == kNoValue ||
        c.get<OpId::copy>().dtype != def.dtype || c.segment != n.segment)
      continue;
    const View& read = c.inputs[0].view;
    const View& made = g.values[size_t(c.outputs[0])].def;
    if (!contiguous(made) || made.shape != read.shape || made.dtype != def.dtype) continue;
    const std::vector<size_t> p = leading_permutation(def, read);
    if (p.empty()) continue;
    bool identity = true;
    for (size_t k = 0; k < p.size(); ++k) identity = identity && p[k] == k;
    if (identity) continue;  // a plain copy: reuse_in_place's
    bool ok = true;
    for (const Operand& o : n.inputs)
      ok = ok && o.defined() && !o.view.layout && o.view.shape.size() <= def.shape.size();
    if (!ok) continue;
    for (Operand& o : n.inputs) o.view = permuted(o.view, def.shape.size(), p);
    n.outputs[0] = c.outputs[0];
    n.fused = "rope+transpose";
    removed[size_t(j)] = true;
    ++count;
  }
  if (count) g.remove_nodes(removed);
  counts["rope+transpose"] += count;
  return count;
}

}  // namespace zenith::graph
