// A first convolution, its ReLU and 2x2 max pooling -> conv2d_relu_max_pool, and their
// backward (the pooling's, then the weight gradient's) -> conv2d_relu_max_pool_backward: the
// convolution's output and its dense gradient are never made (SeedCNN's first layer).
#include "graph/passes/pass_utils.h"
#include "graph/passes/passes.h"

namespace zenith::graph {
namespace {

// What the CPU kernel runs: float32 3x3, stride 1, unpadded, undilated, one group, at most 4
// input channels, output channels a multiple of 8, an output of at least 2x2.
bool conv_kernel_fits(const Graph& g, const Node& c) {
  const Conv2dAttrs& a = c.get<OpId::conv2d>();
  const std::vector<int64_t> ones = {1, 1}, zeros = {0, 0};
  const Operand& x = c.inputs[0];
  return c.inputs.size() >= 2 && x.defined() && c.inputs[1].defined() &&
         g.values[size_t(x.value)].device.type == DeviceType::CPU && x.view.dtype == DType::f32 &&
         c.inputs[1].view.dtype == DType::f32 && a.input_shape.size() == 4 &&
         a.weight_shape.size() == 4 && a.output_shape.size() == 4 && a.weight_shape[2] == 3 &&
         a.weight_shape[3] == 3 && a.stride == ones && a.dilation == ones && a.pad_begin == zeros &&
         a.pad_end == zeros && a.groups == 1 && a.input_shape[1] <= 4 &&
         a.weight_shape[0] % 8 == 0 && a.output_shape[2] >= 2 && a.output_shape[3] >= 2;
}

// The pooling conv2d_relu_max_pool makes: 2x2 stride 2 unpadded over the whole output.
bool pools_the_output(const Conv2dAttrs& c, const Pool2dAttrs& p) {
  return p.training && p.kernel == std::vector<int64_t>{2, 2} &&
         p.stride == std::vector<int64_t>{2, 2} && p.padding == std::vector<int64_t>{0, 0} &&
         p.output_size == std::vector<int64_t>{c.output_shape[2] / 2, c.output_shape[3] / 2};
}

bool any_written_between(const std::vector<std::vector<int>>& writers,
                         const std::vector<Operand>& operands, int from, int to) {
  for (const Operand& o : operands)
    if (written_between(writers, o.value, from, to)) return true;
  return false;
}

}  // namespace

int fuse_conv_pool(Graph& g, FusionCounts& counts) {
  auto [readers, writers, keep, removed] = PassScan(g);
  int forward = 0, backward = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& p = g.nodes[i];
    if (p.op != OpId::max_pool2d_relu || p.inputs.size() != 1 || p.outputs.empty() ||
        !p.inputs[0].defined())
      continue;
    const int ci = g.values[size_t(p.inputs[0].value)].producer;
    if (ci < 0 || g.nodes[size_t(ci)].op != OpId::conv2d) continue;
    const Node& c = g.nodes[size_t(ci)];
    // The convolution's output read by the pooling alone (its backward reads a shape-only
    // stand-in, not this value).
    if (c.outputs.size() != 1 || only_reader(g, readers, keep, c.outputs[0]) != int(i) ||
        !conv_kernel_fits(g, c) ||
        !pools_the_output(c.get<OpId::conv2d>(), p.get<OpId::max_pool2d_relu>()) ||
        any_written_between(writers, c.inputs, ci, int(i)))
      continue;
    // The workspace's one reader, the pooling's backward, and its result's one reader, the
    // weight gradient of this convolution: both or neither (the workspace becomes the fused
    // op's own). A second reader of that result (the input's gradient) leaves all unfused.
    const ValueId ws = p.outputs.size() > 1 ? p.outputs[1] : kNoValue;
    if (ws != kNoValue && (keep[size_t(ws)] || readers[size_t(ws)].size() > 1)) continue;
    int b = -1, w = -1;
    if (ws != kNoValue && readers[size_t(ws)].size() == 1) {
      b = readers[size_t(ws)][0];
      const Node& bn = g.nodes[size_t(b)];
      if (bn.op != OpId::max_pool2d_relu_backward || bn.inputs.size() != 3 ||
          bn.inputs[2].value != ws || !bn.inputs[0].defined() || bn.outputs.size() != 1)
        continue;
      w = only_reader(g, readers, keep, bn.outputs[0]);
      if (w < 0) continue;
      const Node& wn = g.nodes[size_t(w)];
      if (wn.op != OpId::conv2d_backward_weights || wn.inputs.size() != 2 ||
          wn.inputs[0].value != bn.outputs[0] || wn.inputs[1].value != c.inputs[0].value ||
          !(wn.inputs[1].view == c.inputs[0].view) ||
          !attrs_equal(OpId::conv2d, wn.attrs.get(), c.attrs.get()) ||
          written_between(writers, bn.inputs[0].value, b, w) ||
          written_between(writers, ws, b, w) || any_written_between(writers, c.inputs, ci, w))
        continue;
    }
    const Conv2dAttrs& a = c.get<OpId::conv2d>();
    const Operand bias = c.inputs.size() > 2 ? c.inputs[2] : Operand{};
    if (b >= 0) {
      Node& wn = g.nodes[size_t(w)];
      const Node& bn = g.nodes[size_t(b)];
      wn.op = OpId::conv2d_relu_max_pool_backward;  // same attributes (Conv2dAttrs)
      wn.inputs = {bn.inputs[0], wn.inputs[1], c.inputs[1], bias, bn.inputs[2]};
      wn.fused = "conv+relu+maxpool backward";
      removed[size_t(b)] = true;
      ++backward;
    }
    // The workspace: a byte per pooled value (the window's cell and relu's bit).
    if (ws != kNoValue)
      g.values[size_t(ws)].nbytes = size_t(a.output_shape[0] * a.output_shape[1] *
                                           (a.output_shape[2] / 2) * (a.output_shape[3] / 2));
    p.op = OpId::conv2d_relu_max_pool;
    p.attrs = c.attrs;
    p.inputs = c.inputs;
    p.fused = "conv+relu+maxpool";
    removed[size_t(ci)] = true;
    ++forward;
  }
  if (forward) g.remove_nodes(removed);
  counts["conv+relu+maxpool"] += forward;
  counts["conv+relu+maxpool backward"] += backward;
  // Those poolings were counted as max pooling + ReLU fusions.
  counts["maxpool+relu"] -= forward;
  counts["maxpool+relu backward"] -= backward;
  return forward + backward;
}

}  // namespace zenith::graph
