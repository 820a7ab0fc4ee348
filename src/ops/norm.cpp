// Normalisation and dropout: batch norm (batch statistics + running-stat update in training,
// running statistics in eval), layer norm, RMS norm, dropout. Each gradient is one dispatched
// backward kernel (dropout's is a multiply by the saved mask).
#include "core/dispatch.h"
#include "zenith/autograd.h"
#include "zenith/ops.h"

namespace zenith::ops {
namespace {

void check_float(const Tensor& x, const char* op) {
  ZENITH_CHECK(x.defined(), "[", op, "] undefined input");
  ZENITH_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::f64, "[", op,
               "] expected float32 or float64, got ", dtype_name(x.dtype()));
}

// An optional per-feature tensor of `shape` and x's dtype.
void check_param(const Tensor& p, const Tensor& x, const Shape& shape, const char* op,
                 const char* name) {
  if (!p.defined()) return;
  ZENITH_CHECK(p.dtype() == x.dtype(), "[", op, "] ", name, " is ", dtype_name(p.dtype()),
               " but input is ", dtype_name(x.dtype()));
  ZENITH_CHECK(p.shape() == shape, "[", op, "] expected ", name, " ", shape_str(shape), ", got ",
               shape_str(p.shape()), " (input ", shape_str(x.shape()), ")");
}

// Number of elements in the trailing `normalized_shape` of x (validated).
int64_t normalized_size(const Tensor& x, const Shape& normalized_shape, const char* op) {
  const int64_t k = int64_t(normalized_shape.size());
  ZENITH_CHECK(k >= 1 && x.dim() >= k, "[", op, "] normalized_shape ", shape_str(normalized_shape),
               " does not fit input ", shape_str(x.shape()));
  Shape tail(x.shape().end() - k, x.shape().end());
  ZENITH_CHECK(tail == normalized_shape, "[", op, "] normalized_shape ",
               shape_str(normalized_shape), " does not match the trailing dims of input ",
               shape_str(x.shape()));
  return shape_numel(normalized_shape);
}

}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor running_mean,
                  Tensor running_var, bool training, double momentum, double eps) {
  check_float(x, "batch_norm");
  ZENITH_CHECK(x.dim() >= 2, "[batch_norm] expected an input [N, C, ...], got ",
               shape_str(x.shape()));
  const int64_t C = x.size(1);
  check_param(weight, x, {C}, "batch_norm", "weight");
  check_param(bias, x, {C}, "batch_norm", "bias");
  check_param(running_mean, x, {C}, "batch_norm", "running_mean");
  check_param(running_var, x, {C}, "batch_norm", "running_var");
  ZENITH_CHECK(running_mean.defined() == running_var.defined(),
               "[batch_norm] running_mean and running_var must be given together");
  ZENITH_CHECK(training || running_mean.defined(),
               "[batch_norm] eval mode needs running_mean and running_var");
  ZENITH_CHECK(!training || x.numel() / std::max<int64_t>(C, 1) > 1,
               "[batch_norm] training needs more than 1 value per channel, got input ",
               shape_str(x.shape()));
  dispatch::Attrs attrs = {{"training", training}, {"momentum", momentum}, {"eps", eps}};
  auto outs = dispatch::call("batch_norm", {x, weight, bias, running_mean, running_var}, attrs);
  if (autograd::needs_grad({x, weight, bias})) {
    Tensor mean = outs[1], var = outs[2];
    bool gx = x.requires_grad(), gw = weight.defined() && weight.requires_grad();
    bool gb = bias.defined() && bias.requires_grad();
    autograd::record("batch_norm", {x, weight, bias}, {outs[0]}, [=](const std::vector<Tensor>& g) {
      auto d = dispatch::call("batch_norm_backward", {g[0], x, weight, mean, var}, attrs);
      return std::vector<Tensor>{gx ? d[0] : Tensor(), gw ? d[1] : Tensor(), gb ? d[2] : Tensor()};
    });
  }
  return outs[0];
}

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  check_float(x, "layer_norm");
  const int64_t D = normalized_size(x, normalized_shape, "layer_norm");
  check_param(weight, x, normalized_shape, "layer_norm", "weight");
  check_param(bias, x, normalized_shape, "layer_norm", "bias");
  dispatch::Attrs attrs = {{"D", D}, {"eps", eps}};
  auto outs = dispatch::call("layer_norm", {x, weight, bias}, attrs);
  if (autograd::needs_grad({x, weight, bias})) {
    Tensor mean = outs[1], rstd = outs[2];
    bool gw = weight.defined() && weight.requires_grad();
    bool gb = bias.defined() && bias.requires_grad();
    autograd::record("layer_norm", {x, weight, bias}, {outs[0]}, [=](const std::vector<Tensor>& g) {
      auto d = dispatch::call("layer_norm_backward", {g[0], x, weight, mean, rstd}, attrs);
      return std::vector<Tensor>{d[0], gw ? d[1].reshape(normalized_shape) : Tensor(),
                                 gb ? d[2].reshape(normalized_shape) : Tensor()};
    });
  }
  return outs[0];
}

Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, double eps) {
  check_float(x, "rms_norm");
  const int64_t D = normalized_size(x, normalized_shape, "rms_norm");
  check_param(weight, x, normalized_shape, "rms_norm", "weight");
  dispatch::Attrs attrs = {{"D", D}, {"eps", eps}};
  auto outs = dispatch::call("rms_norm", {x, weight}, attrs);
  if (autograd::needs_grad({x, weight})) {
    Tensor rstd = outs[1];
    bool gw = weight.defined() && weight.requires_grad();
    autograd::record("rms_norm", {x, weight}, {outs[0]}, [=](const std::vector<Tensor>& g) {
      auto d = dispatch::call("rms_norm_backward", {g[0], x, weight, rstd}, attrs);
      return std::vector<Tensor>{d[0], gw ? d[1].reshape(normalized_shape) : Tensor()};
    });
  }
  return outs[0];
}

Tensor dropout(const Tensor& x, double p, bool training) {
  check_float(x, "dropout");
  ZENITH_CHECK(p >= 0 && p <= 1, "[dropout] p must be in [0, 1], got ", p);
  if (!training || p == 0) return x;
  auto outs = dispatch::call("dropout", {x}, {{"p", p}});
  if (autograd::needs_grad({x})) {
    Tensor mask = outs[1];
    autograd::record("dropout", {x}, {outs[0]}, [mask](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{mul(g[0], mask)};
    });
  }
  return outs[0];
}

}  // namespace zenith::ops
