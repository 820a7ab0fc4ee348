// conv2d: NCHW convolution with stride, explicit/"same"/"valid" padding, dilation, groups and
// an optional bias. The geometry (padding, output size) is resolved here once and carried in
// Conv2dAttrs. Its gradient is two ops, conv2d_backward_data (dx) and conv2d_backward_weights
// (dweight, dbias), each defined here by a decomposition into conv2d ops (a transposed
// convolution, and a convolution of the input by the output gradient); the CPU registers
// oneDNN / im2col kernels for both as fast paths.
#include "ops/op_utils.h"

namespace zenith::ops {
namespace {

using detail::pair_option;

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

// The shape rule of conv2d: validated geometry with the output shape.
Conv2dAttrs conv2d_geometry(const Shape& xs, const Shape& ws, bool bias,
                            const Conv2dOptions& options) {
  Conv2dAttrs a;
  a.input_shape = xs;
  a.weight_shape = ws;
  a.stride = pair_option(options.stride, "conv2d", "stride", 1);
  a.dilation = pair_option(options.dilation, "conv2d", "dilation", 1);
  a.groups = options.groups;
  a.bias = bias;
  Padding pad = resolve_padding(xs, ws, a.stride, a.dilation, options);
  a.pad_begin = pad.begin;
  a.pad_end = pad.end;
  a.output_shape = {xs[0], ws[0], 0, 0};
  for (size_t i = 0; i < 2; ++i) {
    int64_t span = xs[2 + i] + pad.begin[i] + pad.end[i] - a.dilation[i] * (ws[2 + i] - 1) - 1;
    ZENITH_CHECK(span >= 0, "[conv2d] input ", shape_str(xs), " (padded by ",
                 pad.begin[i] + pad.end[i], ") is smaller than the ",
                 a.dilation[i] > 1 ? "dilated " : "", "kernel (weight ", shape_str(ws), ")");
    a.output_shape[2 + i] = span / a.stride[i] + 1;
  }
  return a;
}

// conv2d with per-side padding that may be negative (cropping the output instead).
Tensor conv2d_cropped(const Tensor& x, const Tensor& w, std::vector<int64_t> pad_begin,
                      std::vector<int64_t> pad_end, std::vector<int64_t> dilation, int64_t groups) {
  Conv2dOptions o;
  o.dilation = dilation;
  o.groups = groups;
  o.padding = {std::max<int64_t>(pad_begin[0], 0), std::max<int64_t>(pad_end[0], 0),
               std::max<int64_t>(pad_begin[1], 0), std::max<int64_t>(pad_end[1], 0)};
  Tensor y = conv2d(x, w, Tensor(), o);
  for (int64_t i = 0; i < 2; ++i) {
    int64_t crop_begin = std::max<int64_t>(-pad_begin[size_t(i)], 0);
    int64_t crop_end = std::max<int64_t>(-pad_end[size_t(i)], 0);
    if (crop_begin > 0 || crop_end > 0) y = y.slice(2 + i, crop_begin, y.size(2 + i) - crop_end);
  }
  return y;
}

// x [N, C, H, W] with stride - 1 zeros inserted between neighbours along dim (2 or 3).
Tensor dilate(const Tensor& x, int64_t dim, int64_t stride) {
  if (stride == 1 || x.size(dim) <= 1) return x;
  Shape zeros_shape = x.shape();
  zeros_shape.insert(zeros_shape.begin() + dim + 1, stride - 1);
  Tensor z = Tensor::zeros(zeros_shape, x.dtype(), x.device());
  Shape joined = x.shape();
  joined[size_t(dim)] *= stride;
  Tensor spread = cat({x.unsqueeze(dim + 1), z}, dim + 1).reshape(joined);
  return spread.narrow(dim, 0, (x.size(dim) - 1) * stride + 1);
}

// w reversed along its two spatial dims.
Tensor flip_spatial(const Tensor& w) {
  Tensor out = w;
  for (int64_t d = 2; d < 4; ++d) {
    std::vector<int64_t> reversed(size_t(w.size(d)));
    for (int64_t i = 0; i < w.size(d); ++i) reversed[size_t(i)] = w.size(d) - 1 - i;
    out = index_select(out, d, Tensor::from_vector(reversed, {w.size(d)}));
  }
  return out;
}

// dx = the transposed convolution of dy by w: dy dilated by the stride, convolved (stride 1)
// with the flipped kernel, channels in and out swapped per group.
std::vector<Tensor> conv2d_backward_data_composed(const std::vector<Tensor>& in,
                                                  const Conv2dAttrs& a) {
  const Tensor& dy = in[0];
  const Tensor& w = in[1];
  const int64_t C = a.input_shape[1], O = a.weight_shape[0], G = a.groups;
  const int64_t KH = a.weight_shape[2], KW = a.weight_shape[3];
  Tensor spread = dilate(dilate(dy, 2, a.stride[0]), 3, a.stride[1]);
  Tensor wt = w.reshape({G, O / G, C / G, KH, KW}).transpose(1, 2).reshape({C, O / G, KH, KW});
  wt = flip_spatial(wt);
  // Input position i of dx sums dy at (i + pad_begin - k dilation) / stride: a full correlation
  // of the spread dy, shifted by pad_begin, cut to the input's size.
  std::vector<int64_t> begin(2), end(2);
  for (size_t i = 0; i < 2; ++i) {
    int64_t span = a.dilation[i] * (a.weight_shape[2 + i] - 1);
    begin[i] = span - a.pad_begin[i];
    end[i] = a.input_shape[2 + i] - spread.size(int64_t(2 + i)) + a.pad_begin[i];
  }
  return {conv2d_cropped(spread, wt, begin, end, a.dilation, G)};
}

// dweight[o, c] = the correlation of input channel c with output gradient channel o over the
// batch: conv2d of x^T [C, N, H, W] by dy^T [O, N, OH, OW], stride and dilation swapped.
std::vector<Tensor> conv2d_backward_weights_composed(const std::vector<Tensor>& in,
                                                     const Conv2dAttrs& a) {
  const Tensor& dy = in[0];
  const Tensor& x = in[1];
  const int64_t C = a.input_shape[1], O = a.weight_shape[0], G = a.groups;
  const int64_t KH = a.weight_shape[2], KW = a.weight_shape[3];
  std::vector<Tensor> groups;
  for (int64_t g = 0; g < G; ++g) {
    Tensor xg = x.narrow(1, g * (C / G), C / G).transpose(0, 1);
    Tensor dyg = dy.narrow(1, g * (O / G), O / G).transpose(0, 1);
    Conv2dOptions o;
    o.stride = a.dilation;
    o.dilation = a.stride;
    o.padding = {a.pad_begin[0], a.pad_end[0], a.pad_begin[1], a.pad_end[1]};
    Tensor r = conv2d(xg, dyg, Tensor(), o);  // [C/G, O/G, >= KH, >= KW]
    groups.push_back(r.narrow(2, 0, KH).narrow(3, 0, KW).transpose(0, 1));
  }
  Tensor dw = G == 1 ? groups[0].contiguous() : cat(groups, 0);
  Tensor db = a.bias ? sum(dy, {0, 2, 3}) : Tensor();
  return {dw, db};
}

ZENITH_REGISTER_DECOMPOSITION(conv2d_backward_data, conv2d_backward_data_composed);
ZENITH_REGISTER_DECOMPOSITION(conv2d_backward_weights, conv2d_backward_weights_composed);

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
  const Conv2dAttrs attrs = conv2d_geometry(xs, ws, bias.defined(), options);
  if (shape_numel(attrs.output_shape) == 0 || xs[1] == 0)
    return Tensor::zeros(attrs.output_shape, x.dtype());  // nothing to convolve

  Tensor out = dispatch::call1<OpId::conv2d>({x, weight, bias}, attrs);
  if (autograd::needs_grad({x, weight, bias})) {
    bool gx = x.requires_grad(), gw = weight.requires_grad();
    bool gb = bias.defined() && bias.requires_grad();
    autograd::record(
        "conv2d", {x, weight, bias}, {out},
        [x, weight, attrs, gx, gw, gb](const std::vector<Tensor>& g) {
          std::vector<Tensor> grads(3);
          if (gx) grads[0] = dispatch::call1<OpId::conv2d_backward_data>({g[0], weight}, attrs);
          if (gw || gb) {
            auto dw = dispatch::call<OpId::conv2d_backward_weights>({g[0], x}, attrs);
            if (gw) grads[1] = dw[0];
            if (gb) grads[2] = dw[1];
          }
          return grads;
        });
  }
  return out;
}

}  // namespace zenith::ops
