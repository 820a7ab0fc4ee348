// In-place reuse: a copy whose source buffer dies at the copy is that buffer. Eager mode copies
// because it cannot know nothing else will read or write the source (autograd's clone of each
// gradient before it lands in .grad, contiguous() on a fresh result); the graph knows. Likewise
// a kernel that can run in place writes its result over an input that dies at it (the memory
// plan gives both one place): eager mode keeps the input because something might read it.
#include <algorithm>

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

namespace {

// Ops whose kernel may write output 0 over one of its inputs: each element (or row) of the
// input is read before the same element of the output is written, nothing else of it after.
struct Overwritable {
  OpId op;
  int input;
};
constexpr Overwritable kOverwritable[] = {
    // dlogits over the logits: per row the max, then dx[k] from x[k] (cpu/loss.cpp).
    {OpId::cross_entropy_rows_backward, 1},
    // out[i] from a[i] and b[i] (cpu/binary.cpp): gradient sums such as a tied embedding's.
    {OpId::add, 0},
    {OpId::add, 1},
    {OpId::sub, 0},
    {OpId::sub, 1},
    {OpId::mul, 0},
    {OpId::mul, 1},
    // dx[i] from dy[i] and the saved x[i] or y[i] (cpu/unary.cpp's unary_backward_kernel).
    {OpId::relu_backward, 0},
    {OpId::relu_backward, 1},
    {OpId::silu_backward, 0},
    {OpId::silu_backward, 1},
    {OpId::gelu_backward, 0},
    {OpId::gelu_backward, 1},
    // A tied embedding's gradient over the output layer's (cpu/index.cpp): row r is base[r]
    // plus its tokens' rows; written in place, only the token rows are touched.
    {OpId::embedding_backward_add, 2},
    // A gradient sum's matmul onto the sum so far (cpu/matmul.cpp): c becomes the result, the
    // gemm accumulating onto it (beta 1).
    {OpId::matmul_add, 2},
    // dx over x, whose values pooling's backward never reads (cpu/pool.cpp: the max pool's
    // workspace or indices say where dy goes; x gives only the shape). Max pooling's backward
    // gets x itself only from a caller other than ops::max_pool2d (which passes a stand-in).
    {OpId::max_pool2d_backward, 1},
    {OpId::avg_pool2d_backward, 1},
};

// The operand views all of its value's buffer, plainly.
// The operand views all of its value's buffer: plainly, or as its producer made it (a oneDNN
// blocked layout, which these kernels convert, if at all, before writing their output).
bool whole_buffer(const Graph& g, const Operand& o) {
  if (!o.defined()) return false;
  const Value& v = g.values[size_t(o.value)];
  if (o.view.layout) return o.view == v.def && v.def.offset == 0;
  return o.view.offset == 0 && plain_contiguous(o.view) && o.view.nbytes() == v.nbytes;
}

}  // namespace

int write_over_dying_inputs(Graph& g) {
  auto readers = g.readers();
  auto writers = g.writers();
  auto keep = g.live_out();
  int count = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    n.overwrites = -1;
    if (n.outputs.empty() || n.outputs[0] == kNoValue || !n.writes.empty()) continue;
    for (const Overwritable& w : kOverwritable) {
      if (w.op != n.op || size_t(w.input) >= n.inputs.size()) continue;
      const Operand& in = n.inputs[size_t(w.input)];
      if (!whole_buffer(g, in)) continue;
      const ValueId v = in.value;
      const Value& src = g.values[size_t(v)];
      const Value& out = g.values[size_t(n.outputs[0])];
      if (src.kind != ValueKind::kIntermediate || keep[size_t(v)] || !writers[size_t(v)].empty())
        continue;
      if (readers[size_t(v)].back() != int(i)) continue;  // read later: not dying here
      // Read once by this node, and the output a whole buffer of the same bytes and type.
      if (std::count_if(n.inputs.begin(), n.inputs.end(),
                        [&](const Operand& o) { return o.value == v; }) != 1)
        continue;
      if ((!out.def.layout && !plain_contiguous(out.def)) || out.def.offset != 0 ||
          out.nbytes != src.nbytes || out.def.dtype != in.view.dtype)
        continue;
      n.overwrites = w.input;
      ++count;
      break;
    }
  }
  return count;
}

}  // namespace zenith::graph
