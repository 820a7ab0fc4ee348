// conv2d: NCHW convolution with stride, explicit/"same"/"valid" padding, dilation, groups and
// an optional bias. Its gradient is two dispatched ops: conv2d_backward_data (dx) and
// conv2d_backward_weights (dweight, dbias).
#include "core/dispatch.h"
#include "zenith/autograd.h"
#include "zenith/ops.h"

namespace zenith::ops {
namespace {

// A 1- or 2-element option as [h, w], all values > `min`.
std::vector<int64_t> pair_option(const std::vector<int64_t>& v, const char* name, int64_t min) {
  ZENITH_CHECK(v.size() == 1 || v.size() == 2, "[conv2d] ", name, " needs 1 or 2 values, got ",
               shape_str(v));
  std::vector<int64_t> out = v.size() == 1 ? std::vector<int64_t>{v[0], v[0]} : v;
  for (auto x : out)
    ZENITH_CHECK(x >= min, "[conv2d] ", name, " must be >= ", min, ", got ", shape_str(v));
  return out;
}

struct Padding {
  std::vector<int64_t> begin, end;  // [top, left], [bottom, right]
};

// "same" pads so that OH = ceil(H / stride) (MindSpore's rule; PyTorch's for stride 1), the odd
// pixel going to the bottom/right; "valid" pads nothing; "explicit" takes 1, 2 (symmetric
// [h, w]) or 4 ([top, bottom, left, right], MindSpore's order) values.
Padding resolve_padding(const Shape& x, const Shape& w, const std::vector<int64_t>& stride,
                        const std::vector<int64_t>& dilation, const ops::Conv2dOptions& o) {
  if (o.padding_mode == "valid") return {{0, 0}, {0, 0}};
  if (o.padding_mode == "same") {
    Padding p{{0, 0}, {0, 0}};
    for (size_t i = 0; i < 2; ++i) {
      int64_t in = x[2 + i], k = dilation[i] * (w[2 + i] - 1) + 1;
      int64_t out = (in + stride[i] - 1) / stride[i];
      int64_t total = std::max<int64_t>(0, (out - 1) * stride[i] + k - in);
      p.begin[i] = total / 2;
      p.end[i] = total - total / 2;
    }
    return p;
  }
  ZENITH_CHECK(o.padding_mode == "explicit", "[conv2d] unknown padding_mode '", o.padding_mode,
               "' (known: explicit, same, valid)");
  const auto& v = o.padding;
  for (auto x : v) ZENITH_CHECK(x >= 0, "[conv2d] padding must be >= 0, got ", shape_str(v));
  if (v.size() == 1) return {{v[0], v[0]}, {v[0], v[0]}};
  if (v.size() == 2) return {{v[0], v[1]}, {v[0], v[1]}};
  ZENITH_CHECK(v.size() == 4, "[conv2d] padding needs 1, 2 or 4 values, got ", shape_str(v));
  return {{v[0], v[2]}, {v[1], v[3]}};
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
              const Conv2dOptions& options) {
  ZENITH_CHECK(x.defined() && weight.defined(), "[conv2d] undefined input");
  ZENITH_CHECK(x.dim() == 4, "[conv2d] expected a 4-d input [N, C, H, W], got ",
               shape_str(x.shape()));
  ZENITH_CHECK(weight.dim() == 4, "[conv2d] expected a 4-d weight [O, C/groups, KH, KW], got ",
               shape_str(weight.shape()));
  ZENITH_CHECK(x.dtype() == weight.dtype(), "[conv2d] input is ", dtype_name(x.dtype()),
               " but weight is ", dtype_name(weight.dtype()));
  ZENITH_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::f64,
               "[conv2d] expected float32 or float64, got ", dtype_name(x.dtype()));
  const int64_t groups = options.groups;
  ZENITH_CHECK(groups >= 1, "[conv2d] groups must be >= 1, got ", groups);
  const Shape& xs = x.shape();
  const Shape& ws = weight.shape();
  ZENITH_CHECK(xs[1] == ws[1] * groups, "[conv2d] input has ", xs[1], " channels, weight expects ",
               ws[1] * groups,
               groups > 1 ? " (" + std::to_string(ws[1]) + " per group x " +
                                std::to_string(groups) + " groups)"
                          : std::string(),
               " (input ", shape_str(xs), ", weight ", shape_str(ws), ")");
  ZENITH_CHECK(ws[0] % groups == 0, "[conv2d] ", ws[0], " output channels are not divisible by ",
               groups, " groups (weight ", shape_str(ws), ")");
  if (bias.defined()) {
    ZENITH_CHECK(bias.dtype() == x.dtype(), "[conv2d] bias is ", dtype_name(bias.dtype()),
                 " but input is ", dtype_name(x.dtype()));
    ZENITH_CHECK(bias.dim() == 1 && bias.size(0) == ws[0], "[conv2d] expected bias [", ws[0],
                 "], got ", shape_str(bias.shape()));
  }
  auto stride = pair_option(options.stride, "stride", 1);
  auto dilation = pair_option(options.dilation, "dilation", 1);
  Padding pad = resolve_padding(xs, ws, stride, dilation, options);
  Shape out_shape = {xs[0], ws[0], 0, 0};
  for (size_t i = 0; i < 2; ++i) {
    int64_t span = xs[2 + i] + pad.begin[i] + pad.end[i] - dilation[i] * (ws[2 + i] - 1) - 1;
    ZENITH_CHECK(span >= 0, "[conv2d] input ", shape_str(xs), " (padded by ",
                 pad.begin[i] + pad.end[i], ") is smaller than the ",
                 dilation[i] > 1 ? "dilated " : "", "kernel (weight ", shape_str(ws), ")");
    out_shape[2 + i] = span / stride[i] + 1;
  }
  if (shape_numel(out_shape) == 0 || xs[1] == 0)
    return Tensor::zeros(out_shape, x.dtype());  // nothing to convolve; no kernel handles it

  dispatch::Attrs attrs = {{"stride", stride},     {"pad_l", pad.begin}, {"pad_r", pad.end},
                           {"dilation", dilation}, {"groups", groups},   {"bias", bias.defined()}};
  Tensor out = dispatch::call1("conv2d", {x, weight, bias}, attrs);
  if (autograd::needs_grad({x, weight, bias})) {
    bool gx = x.requires_grad(), gw = weight.requires_grad();
    bool gb = bias.defined() && bias.requires_grad();
    autograd::record("conv2d", {x, weight, bias}, {out},
                     [x, weight, attrs, gx, gw, gb](const std::vector<Tensor>& g) {
                       std::vector<Tensor> grads(3);
                       if (gx) {
                         dispatch::Attrs a = attrs;
                         a.set("input_shape", x.shape());
                         grads[0] = dispatch::call1("conv2d_backward_data", {g[0], weight}, a);
                       }
                       if (gw || gb) {
                         dispatch::Attrs a = attrs;
                         a.set("weight_shape", weight.shape());
                         auto dw = dispatch::call("conv2d_backward_weights", {g[0], x}, a);
                         if (gw) grads[1] = dw[0];
                         if (gb) grads[2] = dw[1];
                       }
                       return grads;
                     });
  }
  return out;
}

}  // namespace zenith::ops
