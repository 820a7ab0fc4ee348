// Small helpers the fusion passes share.
#pragma once

#include <vector>

#include "graph/ir.h"

namespace zenith::graph {

// What a fusion pass walks the graph with: each value's readers and in-place writers, the values
// the step keeps (Graph::live_out), and which nodes the pass has removed so far. A pass takes
// them apart: `auto [readers, writers, keep, removed] = PassScan(g);`.
struct PassScan {
  explicit PassScan(const Graph& g)
      : readers(g.readers()),
        writers(g.writers()),
        keep(g.live_out()),
        removed(g.nodes.size(), false) {}
  std::vector<std::vector<int>> readers, writers;
  std::vector<bool> keep, removed;
};

// Whether a node strictly between `from` and `to` writes value v in place (writers: from
// Graph::writers()).
inline bool written_between(const std::vector<std::vector<int>>& writers, ValueId v, int from,
                            int to) {
  if (v == kNoValue) return false;
  for (int w : writers[size_t(v)])
    if (w > from && w < to) return true;
  return false;
}

// The single node reading `v` (once, as a whole, not writing it), or -1; -1 too where the step
// keeps v.
inline int only_reader(const Graph& g, const std::vector<std::vector<int>>& readers,
                       const std::vector<bool>& keep, ValueId v) {
  if (v == kNoValue || keep[size_t(v)] || readers[size_t(v)].size() != 1) return -1;
  const Node& r = g.nodes[size_t(readers[size_t(v)][0])];
  int uses = 0;
  for (const Operand& in : r.inputs)
    if (in.value == v) {
      if (!(in.view == g.values[size_t(v)].def)) return -1;
      ++uses;
    }
  for (int w : r.writes)
    if (r.inputs[size_t(w)].value == v) return -1;
  return uses == 1 ? readers[size_t(v)][0] : -1;
}

// The add node that alone reads the only (first) output of node i, an `op` node of n_inputs
// inputs and n_outputs outputs whose first output the step does not keep; -1 otherwise.
inline int sole_add_reader(const Graph& g, const std::vector<std::vector<int>>& readers,
                           const std::vector<bool>& keep, size_t i, OpId op, size_t n_inputs,
                           size_t n_outputs) {
  const Node& n = g.nodes[i];
  if (n.op != op || n.inputs.size() != n_inputs || n.outputs.size() != n_outputs ||
      n.outputs[0] == kNoValue)
    return -1;
  const ValueId v = n.outputs[0];
  if (keep[size_t(v)] || readers[size_t(v)].size() != 1) return -1;
  const int j = readers[size_t(v)][0];
  return g.nodes[size_t(j)].op == OpId::add ? j : -1;
}

// A plain view of a buffer from its start, in row-major order.
inline bool contiguous(const View& v) {
  return !v.layout && v.offset == 0 && v.strides == contiguous_strides(v.shape);
}

// An operand with `shape` and `dtype` that views all of its value's buffer, contiguously (the
// value itself, or a reshape of it).
inline bool whole(const Graph& g, const Operand& o, const Shape& shape, DType dtype) {
  if (!o.defined() || o.view.shape != shape || o.view.dtype != dtype || !contiguous(o.view))
    return false;
  const Value& v = g.values[size_t(o.value)];
  const View& def = v.kind == ValueKind::kIntermediate ? v.def : View::of(v.tensor);
  return contiguous(def) && def.dtype == dtype && shape_numel(def.shape) == shape_numel(shape);
}

}  // namespace zenith::graph
