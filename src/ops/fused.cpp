// The fused ops of the op list: graph mode's fusion passes (src/graph/passes) put one of them in
// place of the ops it stands for. They are not public ops (a captured graph is already
// differentiated, so they need no gradient); each is defined here by its decomposition into
// those ops, which a backend without a fused kernel runs and which the CPU's fast path must
// equal (tests/ops/fused_test.cpp).
#include "ops/op_utils.h"

namespace zenith::ops {
namespace {

// relu(conv2d(x, weight, bias?))
std::vector<Tensor> conv2d_relu_composed(const std::vector<Tensor>& in, const Conv2dAttrs& attrs) {
  return {dispatch::call1<OpId::relu>({dispatch::call1<OpId::conv2d>(in, attrs)})};
}

// batch_norm, then relu of its output; the statistics as batch_norm returns them.
std::vector<Tensor> batch_norm_relu_composed(const std::vector<Tensor>& in,
                                             const BatchNormAttrs& attrs) {
  std::vector<Tensor> out = dispatch::call<OpId::batch_norm>(in, attrs);
  out[0] = dispatch::call1<OpId::relu>({out[0]});
  return out;
}

// (dy, x, weight?, mean, var, y): batch_norm_backward of relu_backward(dy, y).
std::vector<Tensor> batch_norm_relu_backward_composed(const std::vector<Tensor>& in,
                                                      const BatchNormAttrs& attrs) {
  ZENITH_CHECK(in.size() == 6, "[batch_norm_relu_backward] expected 6 inputs, got ", in.size());
  Tensor dz = dispatch::call1<OpId::relu_backward>({in[0], in[5]});
  return dispatch::call<OpId::batch_norm_backward>({dz, in[1], in[2], in[3], in[4]}, attrs);
}

// max_pool2d, then relu of its output; the workspace as max_pool2d returns it.
std::vector<Tensor> max_pool2d_relu_composed(const std::vector<Tensor>& in,
                                             const Pool2dAttrs& attrs) {
  std::vector<Tensor> out = dispatch::call<OpId::max_pool2d>(in, attrs);
  out[0] = dispatch::call1<OpId::relu>({out[0]});
  return out;
}

// (dy, x, workspace): max_pool2d_backward of relu_backward(dy, y), y = relu(max_pool2d(x))
// computed again from x (a backend's workspace may hold relu's mask too; unused here).
std::vector<Tensor> max_pool2d_relu_backward_composed(const std::vector<Tensor>& in,
                                                      const Pool2dAttrs& attrs) {
  ZENITH_CHECK(in.size() == 3, "[max_pool2d_relu_backward] expected 3 inputs, got ", in.size());
  ZENITH_CHECK(in[1].numel() == 0 || in[1].storage()->nbytes() > 0,
               "[max_pool2d_relu_backward] the decomposition reads x's values, got a shape-only "
               "stand-in for x");
  std::vector<Tensor> pooled = dispatch::call<OpId::max_pool2d>({in[1]}, attrs);
  Tensor y = dispatch::call1<OpId::relu>({pooled[0]});
  Tensor dz = dispatch::call1<OpId::relu_backward>({in[0], y});
  return dispatch::call<OpId::max_pool2d_backward>({dz, in[1], pooled[1]}, attrs);
}

// The pooling conv2d_relu_max_pool applies to the convolution's output: 2x2, stride 2.
Pool2dAttrs conv_pool_window(const Conv2dAttrs& attrs) {
  return {.kernel = {2, 2},
          .stride = {2, 2},
          .padding = {0, 0},
          .output_size = {attrs.output_shape[2] / 2, attrs.output_shape[3] / 2},
          .training = true};
}

// (x, weight, bias?): max_pool2d of conv2d, then relu; the workspace as max_pool2d returns it.
std::vector<Tensor> conv2d_relu_max_pool_composed(const std::vector<Tensor>& in,
                                                  const Conv2dAttrs& attrs) {
  Tensor c = dispatch::call1<OpId::conv2d>(in, attrs);
  std::vector<Tensor> out = dispatch::call<OpId::max_pool2d>({c}, conv_pool_window(attrs));
  out[0] = dispatch::call1<OpId::relu>({out[0]});
  return out;
}

// (dy, x, weight, bias?, workspace): conv2d_backward_weights of max_pool2d_backward of
// relu_backward(dy, y), the forward computed again from x (a backend's workspace may hold what
// its kernel needs instead; unused here).
std::vector<Tensor> conv2d_relu_max_pool_backward_composed(const std::vector<Tensor>& in,
                                                           const Conv2dAttrs& attrs) {
  ZENITH_CHECK(in.size() == 5, "[conv2d_relu_max_pool_backward] expected 5 inputs, got ",
               in.size());
  const Pool2dAttrs window = conv_pool_window(attrs);
  Tensor c = dispatch::call1<OpId::conv2d>({in[1], in[2], in[3]}, attrs);
  std::vector<Tensor> pooled = dispatch::call<OpId::max_pool2d>({c}, window);
  Tensor y = dispatch::call1<OpId::relu>({pooled[0]});
  Tensor dz = dispatch::call1<OpId::relu_backward>({in[0], y});
  Tensor dc = dispatch::call1<OpId::max_pool2d_backward>({dz, c, pooled[1]}, window);
  return dispatch::call<OpId::conv2d_backward_weights>({dc, in[1]}, attrs);
}

// The program run op by op: every register a tensor.
std::vector<Tensor> fused_elementwise_composed(const std::vector<Tensor>& in,
                                               const FusedElementwiseAttrs& attrs) {
  ZENITH_CHECK(int64_t(in.size()) == attrs.num_inputs && attrs.code.size() % 5 == 0,
               "[fused_elementwise] expected ", attrs.num_inputs, " inputs, got ", in.size());
  std::vector<Tensor> regs = in;
  for (size_t i = 0; i < attrs.code.size(); i += 5) {
    const OpId op = OpId(attrs.code[i]);
    const int64_t a = attrs.code[i + 2], b = attrs.code[i + 3];
    ZENITH_CHECK(a >= 0 && a < int64_t(regs.size()) && b < int64_t(regs.size()),
                 "[fused_elementwise] malformed instruction ", i / 5);
    if (op == OpId::pow_scalar) {
      const PowScalarAttrs p{.exponent = __builtin_bit_cast(double, attrs.code[i + 4])};
      regs.push_back(dispatch::call1<OpId::pow_scalar>({regs[size_t(a)]}, p));
      continue;
    }
    const NoAttrs none;
    std::vector<Tensor> args = {regs[size_t(a)]};
    if (b >= 0) args.push_back(regs[size_t(b)]);
    regs.push_back(dispatch::call_erased(op, args, &none)[0]);
  }
  std::vector<Tensor> out;
  for (size_t j = 0; j < attrs.outputs.size(); ++j) {
    Tensor r = regs[size_t(attrs.outputs[j])];
    if (attrs.sum_last && j + 1 == attrs.outputs.size()) {
      ReduceAttrs all;
      for (int64_t d = 0; d < r.dim(); ++d) all.dims.push_back(d);
      r = dispatch::call1<OpId::sum>({r}, all);
    }
    out.push_back(r);
  }
  return out;
}

std::vector<Tensor> multi_momentum_update_composed(const std::vector<Tensor>& in,
                                                   const MultiMomentumUpdateAttrs& attrs) {
  const size_t n = size_t(attrs.count);
  for (size_t k = 0; k < n; ++k)
    dispatch::call<OpId::momentum_update>(
        {in[k], in[n + k], in.size() >= 3 * n ? in[2 * n + k] : Tensor()},
        {.lr = attrs.lr,
         .momentum = attrs.momentum,
         .weight_decay = attrs.weight_decay,
         .nesterov = attrs.nesterov});
  return {};
}

std::vector<Tensor> multi_adam_update_composed(const std::vector<Tensor>& in,
                                               const MultiAdamUpdateAttrs& attrs) {
  const size_t n = size_t(attrs.count);
  for (size_t k = 0; k < n; ++k)
    dispatch::call<OpId::adam_update>({in[k], in[n + k], in[2 * n + k], in[3 * n + k]},
                                      {.lr = attrs.lr,
                                       .beta1 = attrs.beta1,
                                       .beta2 = attrs.beta2,
                                       .eps = attrs.eps,
                                       .weight_decay = attrs.weight_decay,
                                       .decoupled = attrs.decoupled,
                                       .step = attrs.step});
  return {};
}

// (a, b, weight?): s = a + b, then rms_norm(s, weight) -> {s, y, rstd}.
std::vector<Tensor> add_rms_norm_composed(const std::vector<Tensor>& in,
                                          const LayerNormAttrs& attrs) {
  ZENITH_CHECK(in.size() == 3, "[add_rms_norm] expected 3 inputs, got ", in.size());
  Tensor sum = dispatch::call1<OpId::add>({in[0], in[1]});
  std::vector<Tensor> norm = dispatch::call<OpId::rms_norm>({sum, in[2]}, attrs);
  return {sum, norm[0], norm[1]};
}

// (dy, x, weight?, rstd, dres): rms_norm_backward, its dx plus dres -> {dx + dres, dweight}.
std::vector<Tensor> rms_norm_add_backward_composed(const std::vector<Tensor>& in,
                                                   const LayerNormAttrs& attrs) {
  ZENITH_CHECK(in.size() == 5, "[rms_norm_add_backward] expected 5 inputs, got ", in.size());
  std::vector<Tensor> g =
      dispatch::call<OpId::rms_norm_backward>({in[0], in[1], in[2], in[3]}, attrs);
  return {dispatch::call1<OpId::add>({g[0], in[4]}), g[1]};
}

// (dy, indices, base): embedding_backward(dy, indices) + base.
std::vector<Tensor> embedding_backward_add_composed(const std::vector<Tensor>& in,
                                                    const EmbeddingBackwardAttrs& attrs) {
  ZENITH_CHECK(in.size() == 3, "[embedding_backward_add] expected 3 inputs, got ", in.size());
  Tensor rows = dispatch::call1<OpId::embedding_backward>({in[0], in[1]}, attrs);
  return {dispatch::call1<OpId::add>({in[2], rows})};
}

// (x [M, D], weight [V, D], target [M], dloss): logits = linear(x, weight), then
// {cross_entropy_rows(logits, target)'s loss, cross_entropy_rows_backward(dloss, logits, ...)}.
std::vector<Tensor> linear_cross_entropy_composed(const std::vector<Tensor>& in,
                                                  const CrossEntropyAttrs& attrs) {
  ZENITH_CHECK(in.size() == 4, "[linear_cross_entropy] expected 4 inputs, got ", in.size());
  Tensor logits = dispatch::call1<OpId::linear>({in[0], in[1], Tensor()});
  std::vector<Tensor> ce = dispatch::call<OpId::cross_entropy_rows>({logits, in[2]}, attrs);
  Tensor dlogits =
      dispatch::call1<OpId::cross_entropy_rows_backward>({in[3], logits, in[2], ce[1]}, attrs);
  return {ce[0], dlogits};
}

std::vector<Tensor> linear_cross_entropy_grads_composed(const std::vector<Tensor>& in,
                                                        const CrossEntropyAttrs& attrs) {
  ZENITH_CHECK(in.size() == 4, "[linear_cross_entropy_grads] expected 4 inputs, got ", in.size());
  std::vector<Tensor> ce = dispatch::call<OpId::linear_cross_entropy>(in, attrs);
  Tensor dx = dispatch::call1<OpId::matmul>({ce[1], in[1]});
  if (!attrs.weight_grad) return {ce[0], dx, Tensor()};
  Tensor dw = dispatch::call1<OpId::matmul>({ce[1].transpose(0, 1), in[0]});
  return {ce[0], dx, dw};
}

// (a, b, c): c + matmul(a, b), in c's shape.
std::vector<Tensor> matmul_add_composed(const std::vector<Tensor>& in, const NoAttrs&) {
  ZENITH_CHECK(in.size() == 3, "[matmul_add] expected 3 inputs, got ", in.size());
  Tensor product = dispatch::call1<OpId::matmul>({in[0], in[1]});
  return {dispatch::call1<OpId::add>({in[2], product.reshape(in[2].shape())})};
}

}  // namespace

ZENITH_REGISTER_DECOMPOSITION(conv2d_relu, conv2d_relu_composed);
ZENITH_REGISTER_DECOMPOSITION(batch_norm_relu, batch_norm_relu_composed);
ZENITH_REGISTER_DECOMPOSITION(batch_norm_relu_backward, batch_norm_relu_backward_composed);
ZENITH_REGISTER_DECOMPOSITION(max_pool2d_relu, max_pool2d_relu_composed);
ZENITH_REGISTER_DECOMPOSITION(max_pool2d_relu_backward, max_pool2d_relu_backward_composed);
ZENITH_REGISTER_DECOMPOSITION(conv2d_relu_max_pool, conv2d_relu_max_pool_composed);
ZENITH_REGISTER_DECOMPOSITION(conv2d_relu_max_pool_backward,
                              conv2d_relu_max_pool_backward_composed);
ZENITH_REGISTER_DECOMPOSITION(fused_elementwise, fused_elementwise_composed);
ZENITH_REGISTER_DECOMPOSITION(multi_momentum_update, multi_momentum_update_composed);
ZENITH_REGISTER_DECOMPOSITION(multi_adam_update, multi_adam_update_composed);
ZENITH_REGISTER_DECOMPOSITION(add_rms_norm, add_rms_norm_composed);
ZENITH_REGISTER_DECOMPOSITION(rms_norm_add_backward, rms_norm_add_backward_composed);
ZENITH_REGISTER_DECOMPOSITION(embedding_backward_add, embedding_backward_add_composed);
ZENITH_REGISTER_DECOMPOSITION(linear_cross_entropy, linear_cross_entropy_composed);
ZENITH_REGISTER_DECOMPOSITION(linear_cross_entropy_grads, linear_cross_entropy_grads_composed);
ZENITH_REGISTER_DECOMPOSITION(matmul_add, matmul_add_composed);

}  // namespace zenith::ops
