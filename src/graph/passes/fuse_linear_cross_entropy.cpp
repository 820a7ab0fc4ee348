// The output layer and its loss (Liger kernel's fused linear cross entropy): the logits of
// linear(x, W) that only cross_entropy_rows and its backward read become one op at the loss's
// place, which makes the loss and the logits' gradient together, tile by tile:
//   l = linear(x, W); loss, lse = cross_entropy_rows(l, t); ...; dl = cross_entropy_rows_backward(
//   dloss, l, t, lse)  ->  loss, dl = linear_cross_entropy(x, W, t, dloss)
// Where dl's only readers are the gradient's two matmuls, dx = dl W and dW = dl^T x, they join
// it too, and dl is never made:
//   ... -> loss, dx, dW = linear_cross_entropy_grads(x, W, t, dloss)
// (else they stay as they are and read dl); where dx's matmul alone reads dl (a frozen output
// layer: LoRA), it joins as the op's only gradient (weight_grad false, no dW made). Fused only
// where the gradient's seed dloss is known at the loss: a folded constant, an input or state, or
// made before it, or made after it by one op over such values, which then moves before the loss
// (zenith finetune's micro-batch weight: the seed is weight x 1, made in the backward). For a
// linear without bias over plain, contiguous float32/float64 operands of one dtype, or float32 x
// with a frozen bfloat16/float16 weight (LoRA's base) where dx's matmul alone reads dl.
#include "graph/passes/pass_utils.h"
#include "graph/passes/passes.h"

namespace zenith::graph {
namespace {

bool fusable_dtype(DType t) { return t == DType::f32 || t == DType::f64; }

// The weight may be 16-bit beside float32 logits (the kernel converts its chunks).
bool fusable_weight(DType w, DType logits) {
  return w == logits || (logits == DType::f32 && (w == DType::bf16 || w == DType::f16));
}

// The linear node that makes the logits `ce` reads, bias-free and with plain [.., D] x and
// [V, D] weight of the logits' dtype; -1 otherwise.
int logits_linear(const Graph& g, const Node& ce) {
  const Operand& l = ce.inputs[0];
  const Value& lv = g.values[size_t(l.value)];
  if (lv.kind != ValueKind::kIntermediate || lv.producer < 0 || l.view.shape.size() != 2) return -1;
  const Node& lin = g.nodes[size_t(lv.producer)];
  const DType dt = l.view.dtype;
  if (lin.op != OpId::linear || lin.inputs.size() != 3 || lin.inputs[2].defined() ||
      lin.outputs.size() != 1 || !lin.writes.empty() || !fusable_dtype(dt) ||
      lin.segment != ce.segment || !whole(g, l, l.view.shape, dt))
    return -1;
  const Operand &x = lin.inputs[0], &w = lin.inputs[1];
  const int64_t v = l.view.shape[1];
  if (w.view.shape != Shape{v, x.view.shape.back()} || !fusable_weight(w.view.dtype, dt) ||
      x.view.dtype != dt || w.view.layout || x.view.layout ||
      w.view.strides != contiguous_strides(w.view.shape) ||
      x.view.strides != contiguous_strides(x.view.shape))
    return -1;
  return lv.producer;
}

// The cross_entropy_rows_backward that alone reads `ce`'s log-sums, of the same logits, target
// and attributes; -1 otherwise.
int sole_backward(const Graph& g, const std::vector<std::vector<int>>& readers, const Node& ce) {
  const ValueId lse = ce.outputs[1];
  if (lse == kNoValue || readers[size_t(lse)].size() != 1) return -1;
  const int b = readers[size_t(lse)][0];
  const Node& nb = g.nodes[size_t(b)];
  if (nb.op != OpId::cross_entropy_rows_backward || nb.inputs.size() != 4 ||
      nb.outputs.size() != 1 || nb.outputs[0] == kNoValue || nb.inputs[3].value != lse ||
      !(nb.inputs[1].value == ce.inputs[0].value && nb.inputs[1].view == ce.inputs[0].view) ||
      !(nb.inputs[2].value == ce.inputs[1].value && nb.inputs[2].view == ce.inputs[1].view) ||
      !attrs_equal(OpId::cross_entropy_rows, ce.attrs.get(), nb.attrs.get()))
    return -1;
  return b;
}

// The matmul nodes dx = dl W and dW = dl^T x that alone read dl (the output of node i, the
// linear_cross_entropy of x and W), after i with neither x nor W written in between, neither
// writing in place; {dx, -1} where dx's matmul alone reads dl; {-1, -1} otherwise.
std::pair<int, int> gradient_matmuls(const Graph& g, const PassScan& scan, int i, ValueId dl,
                                     const Operand& x, const Operand& w) {
  const std::vector<int>& rd = scan.readers[size_t(dl)];
  if (scan.keep[size_t(dl)] || rd.empty() || rd.size() > 2) return {-1, -1};
  const View& def = g.values[size_t(dl)].def;
  if (def.shape.size() != 2 || !contiguous(def)) return {-1, -1};
  const int64_t m = def.shape[0], v = def.shape[1];
  View dl_t = def;
  dl_t.shape = {v, m};
  dl_t.strides = {1, v};
  int dx = -1, dw = -1;
  for (int r : rd) {
    const Node& n = g.nodes[size_t(r)];
    if (n.op != OpId::matmul || n.inputs.size() != 2 || n.outputs.size() != 1 ||
        n.outputs[0] == kNoValue || !n.writes.empty() || n.overwrites >= 0 || r <= i ||
        n.inputs[0].value != dl || n.inputs[1].value == dl ||
        written_between(scan.writers, x.value, i, r) ||
        written_between(scan.writers, w.value, i, r))
      return {-1, -1};
    const Operand& b = n.inputs[1];
    if (n.inputs[0].view == def && b.value == w.value && b.view == w.view && dx < 0)
      dx = r;
    else if (n.inputs[0].view == dl_t && b.value == x.value && b.view == x.view && dw < 0)
      dw = r;
    else
      return {-1, -1};
  }
  if (dx < 0 || (rd.size() == 2 && dw < 0)) return {-1, -1};
  return {dx, dw};
}

// Node s (> i) makes the seed from values that exist before node i, which nothing writes in
// between, and is pure (one output, no in-place write, not random): it can run before i.
bool hoistable(const Graph& g, const PassScan& scan, int s, int i) {
  const Node& n = g.nodes[size_t(s)];
  if (s <= i || n.outputs.size() != 1 || !n.writes.empty() || n.overwrites >= 0 || is_random(n.op))
    return false;
  for (const Operand& in : n.inputs) {
    if (!in.defined()) continue;
    const Value& v = g.values[size_t(in.value)];
    if ((v.kind == ValueKind::kIntermediate && v.producer >= i) ||
        written_between(scan.writers, in.value, i, s))
      return false;
  }
  return true;
}

// Node `from` moved to position `to` (< from) into segment `segment`; producers renumbered.
void move_node(Graph& g, int from, int to, int segment) {
  Node n = std::move(g.nodes[size_t(from)]);
  g.nodes.erase(g.nodes.begin() + from);
  n.segment = segment;
  g.nodes.insert(g.nodes.begin() + to, std::move(n));
  for (int k = to; k <= from; ++k)
    for (size_t o = 0; o < g.nodes[size_t(k)].outputs.size(); ++o)
      if (g.nodes[size_t(k)].outputs[o] != kNoValue)
        g.values[size_t(g.nodes[size_t(k)].outputs[o])].producer = k;
}

// The loss/backward pairs whose seed a later pure op makes: that op moved before the loss.
void hoist_seeds(Graph& g) {
  for (bool moved = true; moved;) {
    moved = false;
    PassScan scan(g);
    for (size_t i = 0; i < g.nodes.size() && !moved; ++i) {
      const Node& ce = g.nodes[i];
      if (ce.op != OpId::cross_entropy_rows || ce.inputs.size() != 2 || ce.outputs.size() != 2)
        continue;
      const int p = logits_linear(g, ce);
      const int b = p < 0 ? -1 : sole_backward(g, scan.readers, ce);
      if (b < 0) continue;
      const Value& dv = g.values[size_t(g.nodes[size_t(b)].inputs[0].value)];
      if (dv.kind != ValueKind::kIntermediate || dv.producer < int(i) || dv.producer > b ||
          !hoistable(g, scan, dv.producer, int(i)))
        continue;
      move_node(g, dv.producer, int(i), ce.segment);
      moved = true;
    }
  }
}

}  // namespace

int fuse_linear_cross_entropy(Graph& g, FusionCounts& counts) {
  hoist_seeds(g);
  PassScan scan(g);
  auto& [readers, writers, keep, removed] = scan;
  int count = 0, with_gradients = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& ce = g.nodes[i];
    if (ce.op != OpId::cross_entropy_rows || ce.inputs.size() != 2 || ce.outputs.size() != 2 ||
        !ce.writes.empty())
      continue;
    const int p = logits_linear(g, ce);
    const int b = p < 0 ? -1 : sole_backward(g, readers, ce);
    if (b < 0 || removed[size_t(p)]) continue;
    // Nothing but the loss and its backward reads the logits, and they outlive neither.
    const ValueId logits = ce.inputs[0].value;
    if (keep[size_t(logits)] || keep[size_t(ce.outputs[1])] ||
        readers[size_t(logits)] != std::vector<int>{int(i), b})
      continue;
    const Node &lin = g.nodes[size_t(p)], &nb = g.nodes[size_t(b)];
    // The seed must exist at the loss: a value from outside the step's nodes or made before.
    const Operand& dloss = nb.inputs[0];
    const Value& dv = g.values[size_t(dloss.value)];
    if (dv.kind == ValueKind::kIntermediate && dv.producer >= int(i)) continue;
    if (written_between(writers, lin.inputs[0].value, p, int(i)) ||
        written_between(writers, lin.inputs[1].value, p, int(i)) ||
        written_between(writers, ce.inputs[1].value, int(i), b) ||
        written_between(writers, dloss.value, int(i), b))
      continue;
    Operand x = lin.inputs[0];
    const int64_t d = x.view.shape.back();
    x.view.shape = {shape_numel(x.view.shape) / d, d};
    x.view.strides = contiguous_strides(x.view.shape);
    if (x.view.shape[0] != ce.inputs[0].view.shape[0]) continue;
    const ValueId dlogits = nb.outputs[0];
    const Operand w = lin.inputs[1], target = ce.inputs[1];
    const auto [mx, mw] = gradient_matmuls(g, scan, int(i), dlogits, x, w);
    const bool grads = mx >= 0 && !removed[size_t(mx)] && (mw < 0 || !removed[size_t(mw)]);
    // A 16-bit weight only as a frozen layer's, with dx's matmul.
    if (w.view.dtype != x.view.dtype && (!grads || mw >= 0)) continue;
    removed[size_t(p)] = removed[size_t(b)] = true;
    ++count;
    ce.inputs = {x, w, target, dloss};  // attrs: CrossEntropyAttrs, as they were
    if (grads) {
      ce.op = OpId::linear_cross_entropy_grads;
      ce.outputs = {ce.outputs[0], g.nodes[size_t(mx)].outputs[0],
                    mw >= 0 ? g.nodes[size_t(mw)].outputs[0] : kNoValue};
      if (mw < 0) {
        CrossEntropyAttrs a = ce.get<OpId::linear_cross_entropy_grads>();
        a.weight_grad = false;
        ce.attrs = copy_attrs(OpId::linear_cross_entropy_grads, &a);
      }
      ce.fused = "linear+cross-entropy+gradient matmuls";
      removed[size_t(mx)] = true;
      if (mw >= 0) removed[size_t(mw)] = true;
      ++with_gradients;
    } else {
      ce.op = OpId::linear_cross_entropy;
      ce.outputs = {ce.outputs[0], dlogits};
      ce.fused = "linear+cross-entropy";
    }
  }
  if (count) g.remove_nodes(removed);
  counts["linear+cross-entropy"] += count;
  if (with_gradients) counts["output layer gradients"] += with_gradients;
  return count;
}

}  // namespace zenith::graph
