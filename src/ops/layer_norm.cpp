// Layer norm and RMS norm (as in PyTorch's layer_norm.cpp, the two norms over the trailing
// `normalized_shape` dims of each row). Their gradients are the ops layer_norm_backward and
// rms_norm_backward, defined here by decompositions into ops; the CPU registers fused row
// kernels for both as fast paths. RMS norm also takes bfloat16/float16 inputs and weights
// (LLaMA checkpoints), computing in float32 as Hugging Face's LlamaRMSNorm does.
#include "ops/op_utils.h"

namespace zenith::ops {
namespace {

using detail::check_float;

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

// x as rows [R, D].
Tensor rows(const Tensor& x, int64_t D) { return x.reshape({-1, D}); }

// dxh = dy weight, both [R, D] (weight broadcast over rows).
Tensor scaled(const Tensor& dy, const Tensor& weight, int64_t D) {
  return weight.defined() ? mul(dy, weight.reshape({1, D})) : dy;
}

// layer_norm_backward(dy, x, weight?, mean, rstd) -> {dx, dweight [D], dbias [D]}:
// dx = rstd (dxh - mean(dxh) - xhat mean(dxh xhat)), xhat = (x - mean) rstd, dxh = dy weight.
std::vector<Tensor> layer_norm_backward_composed(const std::vector<Tensor>& in,
                                                 const LayerNormAttrs& a) {
  Tensor dy = rows(in[0], a.D), x = rows(in[1], a.D);
  Tensor rstd = in[4].reshape({-1, 1});
  Tensor xhat = mul(sub(x, in[3].reshape({-1, 1})), rstd);
  Tensor dxh = scaled(dy, in[2], a.D);
  Tensor c = mean(mul(dxh, xhat), {1}, true);
  Tensor dx = mul(rstd, sub(sub(dxh, mean(dxh, {1}, true)), mul(xhat, c)));
  return {dx.reshape(in[1].shape()), sum(mul(dy, xhat), {0}), sum(dy, {0})};
}

// The type rms_norm computes in: float64 for float64 inputs, else float32.
DType rms_compute_dtype(DType x) { return x == DType::f64 ? DType::f64 : DType::f32; }

// rms_norm_backward(dy, x, weight?, rstd) -> {dx, dweight [D]}:
// dx = rstd (dxh - xhat mean(dxh xhat)), xhat = x rstd, dxh = dy weight; computed in float32
// for 16-bit inputs, dx and dweight returned in the dtypes of x and weight.
std::vector<Tensor> rms_norm_backward_composed(const std::vector<Tensor>& in,
                                               const LayerNormAttrs& a) {
  const DType c = rms_compute_dtype(in[1].dtype());
  Tensor dy = rows(in[0], a.D).to(c), x = rows(in[1], a.D).to(c);
  Tensor w = in[2].defined() ? in[2].to(c) : Tensor();
  Tensor rstd = in[3].reshape({-1, 1});
  Tensor xhat = mul(x, rstd);
  Tensor dxh = scaled(dy, w, a.D);
  Tensor dx = mul(rstd, sub(dxh, mul(xhat, mean(mul(dxh, xhat), {1}, true))));
  Tensor dw = sum(mul(dy, xhat), {0});
  return {dx.reshape(in[1].shape()).to(in[1].dtype()), w.defined() ? dw.to(in[2].dtype()) : dw};
}

ZENITH_REGISTER_DECOMPOSITION(layer_norm_backward, layer_norm_backward_composed);
ZENITH_REGISTER_DECOMPOSITION(rms_norm_backward, rms_norm_backward_composed);

}  // namespace

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  check_float(x, "layer_norm");
  const int64_t D = normalized_size(x, normalized_shape, "layer_norm");
  check_param(weight, x, normalized_shape, "layer_norm", "weight");
  check_param(bias, x, normalized_shape, "layer_norm", "bias");
  const LayerNormAttrs attrs{.D = D, .eps = eps};
  auto outs = dispatch::call<OpId::layer_norm>({x, weight, bias}, attrs);
  if (autograd::needs_grad({x, weight, bias})) {
    Tensor mean = outs[1], rstd = outs[2];
    bool gw = weight.defined() && weight.requires_grad();
    bool gb = bias.defined() && bias.requires_grad();
    autograd::record("layer_norm", {x, weight, bias}, {outs[0]}, [=](const std::vector<Tensor>& g) {
      Tensor m = mean, r = rstd;
      if (autograd::grad_enabled()) {  // create_graph: the row statistics as functions of x
        Tensor xr = rows(x, D);
        m = ops::mean(xr, {1});
        r = rsqrt(add(var(xr, {1}, /*unbiased=*/false), eps));
      }
      auto d = dispatch::call<OpId::layer_norm_backward>({g[0], x, weight, m, r}, attrs);
      return std::vector<Tensor>{d[0], gw ? d[1].reshape(normalized_shape) : Tensor(),
                                 gb ? d[2].reshape(normalized_shape) : Tensor()};
    });
  }
  return outs[0];
}

// y = weight * (x rstd cast back to x's dtype), rstd = 1 / sqrt(mean(x^2) + eps) in float32
// (float64 for float64 x); the dtype of y is that of weight * x (float32 for a float32 input
// and a 16-bit weight).
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, double eps) {
  ZENITH_CHECK(x.defined(), "[rms_norm] undefined input");
  ZENITH_CHECK(is_floating(x.dtype()), "[rms_norm] expected a floating input, got ",
               dtype_name(x.dtype()));
  const int64_t D = normalized_size(x, normalized_shape, "rms_norm");
  if (weight.defined()) {
    ZENITH_CHECK(
        is_floating(weight.dtype()) && (x.dtype() == DType::f64) == (weight.dtype() == DType::f64),
        "[rms_norm] weight is ", dtype_name(weight.dtype()), " but input is ",
        dtype_name(x.dtype()));
    ZENITH_CHECK(weight.shape() == normalized_shape, "[rms_norm] expected weight ",
                 shape_str(normalized_shape), ", got ", shape_str(weight.shape()), " (input ",
                 shape_str(x.shape()), ")");
  }
  const LayerNormAttrs attrs{.D = D, .eps = eps};
  auto outs = dispatch::call<OpId::rms_norm>({x, weight}, attrs);
  if (autograd::needs_grad({x, weight})) {
    Tensor rstd = outs[1];
    bool gw = weight.defined() && weight.requires_grad();
    autograd::record("rms_norm", {x, weight}, {outs[0]}, [=](const std::vector<Tensor>& g) {
      Tensor r = rstd;
      if (autograd::grad_enabled())  // create_graph: rstd as a function of x
        r = rsqrt(add(ops::mean(square(rows(x, D).to(rstd.dtype())), {1}), eps));
      auto d = dispatch::call<OpId::rms_norm_backward>({g[0], x, weight, r}, attrs);
      return std::vector<Tensor>{d[0], gw ? d[1].reshape(normalized_shape) : Tensor()};
    });
  }
  return outs[0];
}

}  // namespace zenith::ops
