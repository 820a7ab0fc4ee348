// Batch normalisation: batch statistics + running-stat update in training, running statistics
// in eval. Its gradient is the op batch_norm_backward, defined here by a decomposition into ops;
// the CPU registers fused kernels (channel loops, oneDNN) as fast paths.
#include "ops/op_utils.h"

namespace zenith::ops {
namespace {

// Every dim but the channels (1): the dims batch statistics reduce over.
std::vector<int64_t> stat_dims(const Tensor& x) {
  std::vector<int64_t> dims = {0};
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  return dims;
}

// A per-channel [C] tensor as [1, C, 1, ...], to broadcast against x.
Tensor per_channel(const Tensor& v, const Tensor& x) {
  Shape s(size_t(x.dim()), 1);
  s[1] = x.size(1);
  return v.reshape(s);
}

// batch_norm_backward(dy, x, weight?, mean, var) -> {dx, dweight, dbias}, xhat = (x - mean) rstd:
// training: dx = weight rstd (dy - mean(dy) - xhat mean(dy xhat)); eval: dx = weight rstd dy.
std::vector<Tensor> batch_norm_backward_composed(const std::vector<Tensor>& in,
                                                 const BatchNormAttrs& a) {
  const Tensor& dy = in[0];
  const Tensor& x = in[1];
  const Tensor& weight = in[2];
  auto dims = stat_dims(x);
  Tensor rstd = per_channel(rsqrt(add(in[4], a.eps)), x);
  Tensor xhat = mul(sub(x, per_channel(in[3], x)), rstd);
  Tensor db = sum(dy, dims), dw = sum(mul(dy, xhat), dims);
  Tensor scale = weight.defined() ? mul(per_channel(weight, x), rstd) : rstd;
  if (!a.training) return {mul(scale, dy), dw, db};
  Tensor centred = sub(dy, mean(dy, dims, true));
  Tensor dx = mul(scale, sub(centred, mul(xhat, mean(mul(dy, xhat), dims, true))));
  return {dx, dw, db};
}

ZENITH_REGISTER_DECOMPOSITION(batch_norm_backward, batch_norm_backward_composed);

// An optional per-channel tensor of x's dtype.
void check_param(const Tensor& p, const Tensor& x, int64_t C, const char* name) {
  if (!p.defined()) return;
  ZENITH_CHECK(p.dtype() == x.dtype(), "[batch_norm] ", name, " is ", dtype_name(p.dtype()),
               " but input is ", dtype_name(x.dtype()));
  ZENITH_CHECK(p.shape() == Shape{C}, "[batch_norm] expected ", name, " ", shape_str({C}), ", got ",
               shape_str(p.shape()), " (input ", shape_str(x.shape()), ")");
}

}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor running_mean,
                  Tensor running_var, bool training, double momentum, double eps) {
  detail::check_float(x, "batch_norm");
  ZENITH_CHECK(x.dim() >= 2, "[batch_norm] expected an input [N, C, ...], got ",
               shape_str(x.shape()));
  const int64_t C = x.size(1);
  check_param(weight, x, C, "weight");
  check_param(bias, x, C, "bias");
  check_param(running_mean, x, C, "running_mean");
  check_param(running_var, x, C, "running_var");
  ZENITH_CHECK(running_mean.defined() == running_var.defined(),
               "[batch_norm] running_mean and running_var must be given together");
  ZENITH_CHECK(training || running_mean.defined(),
               "[batch_norm] eval mode needs running_mean and running_var");
  ZENITH_CHECK(!training || x.numel() / std::max<int64_t>(C, 1) > 1,
               "[batch_norm] training needs more than 1 value per channel, got input ",
               shape_str(x.shape()));
  const BatchNormAttrs attrs{.training = training, .momentum = momentum, .eps = eps};
  auto outs = dispatch::call<OpId::batch_norm>({x, weight, bias, running_mean, running_var}, attrs);
  if (autograd::needs_grad({x, weight, bias})) {
    Tensor mean = outs[1], var = outs[2];
    bool gx = x.requires_grad(), gw = weight.defined() && weight.requires_grad();
    bool gb = bias.defined() && bias.requires_grad();
    autograd::record("batch_norm", {x, weight, bias}, {outs[0]}, [=](const std::vector<Tensor>& g) {
      Tensor m = mean, v = var;
      if (training && autograd::grad_enabled()) {
        // A create_graph backward: the batch statistics as functions of x, so that the
        // gradient's own gradient sees them change with x.
        m = ops::mean(x, stat_dims(x));
        v = ops::var(x, stat_dims(x), /*unbiased=*/false);
      }
      auto d = dispatch::call<OpId::batch_norm_backward>({g[0], x, weight, m, v}, attrs);
      return std::vector<Tensor>{gx ? d[0] : Tensor(), gw ? d[1] : Tensor(), gb ? d[2] : Tensor()};
    });
  }
  return outs[0];
}

}  // namespace zenith::ops
