// Conv+ReLU, BatchNorm+ReLU and MaxPool+ReLU fusion. Training allows all three: relu's backward
// reads relu's output, which the fused op returns; conv's backward reads conv's input, batch
// norm's backward batch norm's input, max pooling's backward its workspace, none of which the
// fusion touches.
#include "graph/passes/pass_utils.h"
#include "graph/passes/passes.h"

namespace zenith::graph {
namespace {

// The windows the CPU kernel of max_pool2d_relu runs itself (2x2 stride 2 unpadded, float32,
// channels a multiple of 8, training): only its workspace carries relu's mask to the fused
// backward, whose decomposition would need x's values (graph mode passes a shape-only x).
bool pool_relu_kernel_window(const Graph& g, const Node& p) {
  const Pool2dAttrs& a = p.get<OpId::max_pool2d>();
  const Operand& x = p.inputs[0];
  return x.defined() && g.values[size_t(x.value)].device.type == DeviceType::CPU &&
         x.view.dtype == DType::f32 && x.view.shape.size() == 4 && x.view.shape[1] % 8 == 0 &&
         a.training && a.kernel == std::vector<int64_t>{2, 2} &&
         a.stride == std::vector<int64_t>{2, 2} && a.padding == std::vector<int64_t>{0, 0};
}

}  // namespace

int fuse_conv_relu(Graph& g, FusionCounts& counts) {
  auto readers = g.readers();
  auto keep = g.live_out();
  std::vector<bool> removed(g.nodes.size(), false);
  int count = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& c = g.nodes[i];
    if (c.op != OpId::conv2d || c.outputs.empty()) continue;
    int r = only_reader(g, readers, keep, c.outputs[0]);
    if (r < 0 || g.nodes[size_t(r)].op != OpId::relu) continue;
    Node& relu = g.nodes[size_t(r)];
    c.op = OpId::conv2d_relu;  // same attributes (Conv2dAttrs)
    c.outputs[0] = relu.outputs[0];
    c.fused = "conv+relu";
    removed[size_t(r)] = true;
    ++count;
  }
  if (count) g.remove_nodes(removed);
  counts["conv+relu"] += count;
  return count;
}

int fuse_batch_norm_relu(Graph& g, FusionCounts& counts) {
  int forward = 0, backward = 0;
  {
    auto readers = g.readers();
    auto keep = g.live_out();
    std::vector<bool> removed(g.nodes.size(), false);
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      Node& b = g.nodes[i];
      if (b.op != OpId::batch_norm || b.outputs.empty()) continue;
      int r = only_reader(g, readers, keep, b.outputs[0]);
      if (r < 0 || g.nodes[size_t(r)].op != OpId::relu) continue;
      b.op = OpId::batch_norm_relu;
      b.outputs[0] = g.nodes[size_t(r)].outputs[0];
      b.fused = "bn+relu";
      removed[size_t(r)] = true;
      ++forward;
    }
    if (forward) g.remove_nodes(removed);
  }
  {
    auto [readers, writers, keep, removed] = PassScan(g);
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const Node& rb = g.nodes[i];
      if (rb.op != OpId::relu_backward || rb.outputs.empty() || !rb.inputs[1].defined()) continue;
      int b = only_reader(g, readers, keep, rb.outputs[0]);
      if (b < 0) continue;
      Node& bb = g.nodes[size_t(b)];
      if (bb.op != OpId::batch_norm_backward || bb.inputs[0].value != rb.outputs[0]) continue;
      if (written_between(writers, rb.inputs[0].value, int(i), b) ||
          written_between(writers, rb.inputs[1].value, int(i), b))
        continue;
      // Its mask must have the shape batch norm's input has.
      if (rb.inputs[1].view.shape != bb.inputs[1].view.shape) continue;
      bb.op = OpId::batch_norm_relu_backward;
      std::vector<Operand> in = {rb.inputs[0], bb.inputs[1], bb.inputs[2],
                                 bb.inputs[3], bb.inputs[4], rb.inputs[1]};
      bb.inputs = std::move(in);
      bb.fused = "bn+relu backward";
      removed[i] = true;
      ++backward;
    }
    if (backward) g.remove_nodes(removed);
  }
  counts["bn+relu"] += forward;
  counts["bn+relu backward"] += backward;
  return forward + backward;
}

int fuse_pool_relu(Graph& g, FusionCounts& counts) {
  auto [readers, writers, keep, removed] = PassScan(g);
  int forward = 0, backward = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& p = g.nodes[i];
    if (p.op != OpId::max_pool2d || p.outputs.empty() || !pool_relu_kernel_window(g, p)) continue;
    const int r = only_reader(g, readers, keep, p.outputs[0]);
    if (r < 0 || g.nodes[size_t(r)].op != OpId::relu || g.nodes[size_t(r)].outputs.empty())
      continue;
    const ValueId y = g.nodes[size_t(r)].outputs[0];
    // The workspace's one reader, max_pool2d_backward, must become the fused backward too: its
    // dy the result of relu_backward(dy, y) that only it reads. (No reader: inference.)
    const ValueId ws = p.outputs.size() > 1 ? p.outputs[1] : kNoValue;
    int b = -1, rb = -1;
    if (ws != kNoValue && (keep[size_t(ws)] || readers[size_t(ws)].size() > 1)) continue;
    if (ws != kNoValue && readers[size_t(ws)].size() == 1) {
      b = readers[size_t(ws)][0];
      const Node& bn = g.nodes[size_t(b)];
      if (bn.op != OpId::max_pool2d_backward || bn.inputs.size() != 3 || bn.inputs[2].value != ws ||
          !bn.inputs[0].defined())
        continue;
      rb = g.values[size_t(bn.inputs[0].value)].producer;
      if (rb < 0 || only_reader(g, readers, keep, bn.inputs[0].value) != b) continue;
      const Node& rbn = g.nodes[size_t(rb)];
      if (rbn.op != OpId::relu_backward || rbn.inputs[1].value != y ||
          !(rbn.inputs[1].view == g.values[size_t(y)].def) ||
          rbn.inputs[0].view.shape != bn.inputs[0].view.shape ||
          written_between(writers, rbn.inputs[0].value, rb, b) ||
          written_between(writers, y, rb, b))
        continue;
    }
    p.op = OpId::max_pool2d_relu;  // same attributes (Pool2dAttrs)
    p.outputs[0] = y;
    p.fused = "maxpool+relu";
    removed[size_t(r)] = true;
    ++forward;
    if (b < 0) continue;
    Node& bn = g.nodes[size_t(b)];
    const Node& rbn = g.nodes[size_t(rb)];
    bn.op = OpId::max_pool2d_relu_backward;
    bn.inputs = {rbn.inputs[0], bn.inputs[1], bn.inputs[2]};
    bn.fused = "maxpool+relu backward";
    removed[size_t(rb)] = true;
    ++backward;
  }
  if (forward) g.remove_nodes(removed);
  counts["maxpool+relu"] += forward;
  counts["maxpool+relu backward"] += backward;
  return forward + backward;
}

}  // namespace zenith::graph
