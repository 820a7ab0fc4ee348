// Constant folding: a node that reads only constants (values made outside any op and never
// written by the graph) is run once now; its outputs become constants. A fill or copy into a
// constant that only it writes, before anything reads that constant, already happened during
// capture: the constant holds its result, and the node goes.
#include <algorithm>

#include "graph/passes/passes.h"
#include "graph/replay.h"

namespace zenith::graph {
namespace {

Tensor constant_view(const Value& v, const View& view) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = v.tensor.storage();
  impl->shape = view.shape;
  impl->strides = view.strides;
  impl->offset = view.offset;
  impl->dtype = view.dtype;
  impl->device = v.tensor.device();
  impl->layout = view.layout;
  return Tensor(std::move(impl));
}

}  // namespace

int fold_constants(Graph& g) {
  auto writers = g.writers();
  auto readers = g.readers();
  std::vector<bool> removed(g.nodes.size(), false);
  int count = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    if (is_random(n.op)) continue;
    bool foldable = true;
    for (size_t k = 0; k < n.inputs.size() && foldable; ++k) {
      const Operand& in = n.inputs[k];
      if (!in.defined()) continue;
      const Value& v = g.values[size_t(in.value)];
      const auto& w = writers[size_t(in.value)];
      const bool written_here =
          std::find(n.writes.begin(), n.writes.end(), int(k)) != n.writes.end();
      if (v.kind != ValueKind::kConstant) {
        foldable = false;
      } else if (written_here) {
        // Only this node writes it, and nothing reads it before.
        foldable = w.size() == 1 && readers[size_t(in.value)].front() == int(i);
      } else {
        foldable = w.empty();
      }
    }
    if (!foldable) continue;
    for (ValueId o : n.outputs)
      if (o != kNoValue && g.values[size_t(o)].kind != ValueKind::kIntermediate) foldable = false;
    if (!foldable) continue;
    bool has_outputs = false;
    for (ValueId o : n.outputs) has_outputs = has_outputs || o != kNoValue;
    if (has_outputs) {
      // Run the kernel on the constants; its outputs become constants.
      std::vector<Tensor> args;
      for (const Operand& in : n.inputs)
        args.push_back(in.defined() ? constant_view(g.values[size_t(in.value)], in.view)
                                    : Tensor());
      Device device = args.empty() ? kCPU : args[0].device();
      auto kernel = replay_kernel(n.op, device.type);
      if (!kernel) continue;
      std::vector<Tensor> out = kernel(args, n.attrs.get());
      for (size_t k = 0; k < n.outputs.size(); ++k) {
        if (n.outputs[k] == kNoValue) continue;
        Value& v = g.values[size_t(n.outputs[k])];
        v.kind = ValueKind::kConstant;
        v.tensor = out.at(k);
        v.def = View::of(v.tensor);
        v.producer = -1;
      }
    }
    removed[i] = true;
    ++count;
    // The constants it wrote are final now: later nodes reading only them fold too.
    for (int k : n.writes) {
      auto& w = writers[size_t(n.inputs[size_t(k)].value)];
      w.erase(std::remove(w.begin(), w.end(), int(i)), w.end());
    }
  }
  if (count) g.remove_nodes(removed);
  return count;
}

}  // namespace zenith::graph
