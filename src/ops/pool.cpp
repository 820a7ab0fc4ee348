// 2-d pooling over NCHW: max, average (count_include_pad as in PyTorch) and adaptive average
// (an average pool when the sizes divide). The window geometry and output size are resolved
// here once and carried in the attributes. Each gradient is an op defined here by a
// decomposition into gather / scatter-add ops over the windows; the CPU registers oneDNN and
// reference kernels for them (max pooling's through oneDNN's saved workspace) as fast paths.
#include <limits>

#include "core/decomposition_forced.h"
#include "core/grad_mode.h"
#include "core/shape.h"
#include "ops/op_utils.h"

namespace zenith::ops {
namespace {

using detail::pair_option;
using detail::scatter_add_into;

void check_input(const Tensor& x, const char* op) {
  ZENITH_CHECK(x.defined(), "[", op, "] undefined input");
  ZENITH_CHECK(x.dim() == 4, "[", op, "] expected a 4-d input [N, C, H, W], got ",
               shape_str(x.shape()));
  ZENITH_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::f64, "[", op,
               "] expected float32 or float64, got ", dtype_name(x.dtype()));
}

// The shape rule of max/avg pooling: validated window (stride defaults to the kernel size) and
// the output size.
Pool2dAttrs window_attrs(const Tensor& x, const char* op, const std::vector<int64_t>& kernel_in,
                         const std::vector<int64_t>& stride_in,
                         const std::vector<int64_t>& padding_in) {
  Pool2dAttrs a;
  a.kernel = pair_option(kernel_in, op, "kernel", 1);
  a.stride = stride_in.empty() ? a.kernel : pair_option(stride_in, op, "stride", 1);
  a.padding = pair_option(padding_in, op, "padding", 0);
  for (size_t i = 0; i < 2; ++i) {
    ZENITH_CHECK(2 * a.padding[i] <= a.kernel[i], "[", op, "] padding ", shape_str(a.padding),
                 " must be at most half the kernel ", shape_str(a.kernel));
    int64_t padded = x.shape()[2 + i] + 2 * a.padding[i];
    ZENITH_CHECK(padded >= a.kernel[i], "[", op, "] input ", shape_str(x.shape()),
                 " is smaller than the kernel ", shape_str(a.kernel));
    a.output_size[i] = (padded - a.kernel[i]) / a.stride[i] + 1;  // kernels read it from here
  }
  return a;
}

// ---- gradients as ops. A pooling maps output cell o of each (n, c) plane to input cells; a
// window table lists (o, input position p) pairs, p = ih * W + iw.

// The K = KH * KW cells of every output window, k-major (k = kh * KW + kw); a cell in the
// padding has valid = false and position 0.
struct WindowTable {
  int64_t K = 0, P = 0;        // cells per window, output cells per plane
  std::vector<int64_t> pos;    // [K * P]
  std::vector<bool> valid;     // [K * P]
  std::vector<int64_t> count;  // [P]: avg pooling's divisor
};

WindowTable window_table(const Pool2dAttrs& a, int64_t H, int64_t W) {
  const int64_t OH = a.output_size[0], OW = a.output_size[1];
  WindowTable t;
  t.K = a.kernel[0] * a.kernel[1];
  t.P = OH * OW;
  t.pos.assign(size_t(t.K * t.P), 0);
  t.valid.assign(size_t(t.K * t.P), false);
  t.count.assign(size_t(t.P), 0);
  for (int64_t oh = 0; oh < OH; ++oh)
    for (int64_t ow = 0; ow < OW; ++ow) {
      const int64_t o = oh * OW + ow;
      const PoolWindow wh = pool_window(oh, a.kernel[0], a.stride[0], a.padding[0], H);
      const PoolWindow ww = pool_window(ow, a.kernel[1], a.stride[1], a.padding[1], W);
      const int64_t h0 = oh * a.stride[0] - a.padding[0], w0 = ow * a.stride[1] - a.padding[1];
      for (int64_t ih = wh.begin; ih < wh.end; ++ih)
        for (int64_t iw = ww.begin; iw < ww.end; ++iw) {
          const size_t j = size_t(((ih - h0) * a.kernel[1] + (iw - w0)) * t.P + o);
          t.pos[j] = ih * W + iw;
          t.valid[j] = true;
        }
      t.count[size_t(o)] =
          a.count_include_pad ? wh.padded * ww.padded : (wh.end - wh.begin) * (ww.end - ww.begin);
    }
  return t;
}

// dx [N, C, H, W] with dx[n, c, pos_j] += weight_j dy[n, c, out_j] for every pair j.
Tensor scatter_windows(const Tensor& dy, const Shape& x_shape, const std::vector<int64_t>& out,
                       const std::vector<int64_t>& pos, const std::vector<double>& weight) {
  const int64_t N = x_shape[0], C = x_shape[1], J = int64_t(out.size());
  Tensor dyf = dy.reshape({N, C, dy.size(2) * dy.size(3)});
  Tensor out_index = Tensor::from_vector(out, {1, 1, J}).expand({N, C, J});
  Tensor pos_index = Tensor::from_vector(pos, {1, 1, J}).expand({N, C, J});
  Tensor w = Tensor::from_vector(weight, {1, 1, J}, dy.dtype());
  Tensor src = mul(gather(dyf, 2, out_index), w);
  return scatter_add_into(src, pos_index, 2, {N, C, x_shape[2] * x_shape[3]}).reshape(x_shape);
}

// avg_pool2d_backward(dy, x): every window cell gets dy / count.
std::vector<Tensor> avg_pool2d_backward_composed(const std::vector<Tensor>& in,
                                                 const Pool2dAttrs& a) {
  const Shape& xs = in[1].shape();
  WindowTable t = window_table(a, xs[2], xs[3]);
  std::vector<int64_t> out, pos;
  std::vector<double> weight;
  for (int64_t k = 0; k < t.K; ++k)
    for (int64_t o = 0; o < t.P; ++o) {
      const size_t j = size_t(k * t.P + o);
      if (!t.valid[j]) continue;
      out.push_back(o);
      pos.push_back(t.pos[j]);
      weight.push_back(1.0 / double(t.count[size_t(o)]));
    }
  return {scatter_windows(in[0], xs, out, pos, weight)};
}

// max_pool2d_backward(dy, x, workspace): dy goes to the first maximum of each window, found
// again from x (the workspace is a backend's own record of it, unused here).
std::vector<Tensor> max_pool2d_backward_composed(const std::vector<Tensor>& in,
                                                 const Pool2dAttrs& a) {
  const Tensor& x = in[1];
  ZENITH_CHECK(x.numel() == 0 || x.storage()->nbytes() > 0,
               "[max_pool2d_backward] the decomposition reads x's values, got a shape-only "
               "stand-in for x");
  const Shape& xs = x.shape();
  const int64_t N = xs[0], C = xs[1], HW = xs[2] * xs[3];
  WindowTable t = window_table(a, xs[2], xs[3]);
  const int64_t KP = t.K * t.P;
  Tensor positions = Tensor::from_vector(t.pos, {1, 1, KP});
  std::vector<double> outside(static_cast<size_t>(KP));
  for (size_t j = 0; j < outside.size(); ++j) outside[j] = t.valid[j] ? 0.0 : 1.0;
  Tensor padding = Tensor::from_vector(outside, {1, 1, KP}, DType::b8);
  Tensor cells = gather(x.reshape({N, C, HW}), 2, positions.expand({N, C, KP}));
  cells = masked_fill(cells, padding, -std::numeric_limits<double>::infinity());
  Tensor k = argmax(cells.reshape({N, C, t.K, t.P}), 2, true);  // [N, C, 1, P]
  Tensor at = gather(positions.reshape({1, 1, t.K, t.P}).expand({N, C, t.K, t.P}), 2, k);
  Tensor dy = in[0].reshape({N, C, 1, t.P});
  return {scatter_add_into(dy, at, 3, {N, C, 1, HW}).reshape(xs)};
}

// adaptive_avg_pool2d_backward(dy): every cell of an output's window gets dy / its size.
std::vector<Tensor> adaptive_avg_pool2d_backward_composed(const std::vector<Tensor>& in,
                                                          const AdaptivePool2dAttrs& a) {
  const Shape& xs = a.input_shape;
  const int64_t H = xs[2], W = xs[3], OH = a.output_size[0], OW = a.output_size[1];
  std::vector<int64_t> out, pos;
  std::vector<double> weight;
  for (int64_t oh = 0; oh < OH; ++oh) {
    const PoolWindow wh = adaptive_pool_window(oh, H, OH);
    for (int64_t ow = 0; ow < OW; ++ow) {
      const PoolWindow ww = adaptive_pool_window(ow, W, OW);
      const double share = 1.0 / double(wh.padded * ww.padded);
      for (int64_t ih = wh.begin; ih < wh.end; ++ih)
        for (int64_t iw = ww.begin; iw < ww.end; ++iw) {
          out.push_back(oh * OW + ow);
          pos.push_back(ih * W + iw);
          weight.push_back(share);
        }
    }
  }
  return {scatter_windows(in[0], xs, out, pos, weight)};
}

ZENITH_REGISTER_DECOMPOSITION(max_pool2d_backward, max_pool2d_backward_composed);
ZENITH_REGISTER_DECOMPOSITION(avg_pool2d_backward, avg_pool2d_backward_composed);
ZENITH_REGISTER_DECOMPOSITION(adaptive_avg_pool2d_backward, adaptive_avg_pool2d_backward_composed);

// A stand-in for x that has its shape, strides, dtype, device and layout (a oneDNN blocked
// format picks the workspace's format) but no bytes: max pooling's backward kernels take where
// dy goes from the workspace or indices and only the shape and format from x, so a graph's
// plan may free x after the forward's last reader.
Tensor shape_and_layout_of(const Tensor& x) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(nullptr, 0, x.device(), [] {});
  impl->shape = x.shape();
  impl->strides = x.strides();
  impl->dtype = x.dtype();
  impl->device = x.device();
  impl->layout = x.impl().layout;
  return Tensor(std::move(impl));
}

}  // namespace

Tensor max_pool2d(const Tensor& x, std::vector<int64_t> kernel, std::vector<int64_t> stride,
                  std::vector<int64_t> padding) {
  check_input(x, "max_pool2d");
  Pool2dAttrs attrs = window_attrs(x, "max_pool2d", kernel, stride, padding);
  attrs.training = autograd::needs_grad({x});
  auto outs = dispatch::call<OpId::max_pool2d>({x}, attrs);
  if (attrs.training) {
    Tensor ws = outs.size() > 1 ? outs[1] : Tensor();
    autograd::record("max_pool2d", {x}, {outs[0]}, [x, ws, attrs](const std::vector<Tensor>& g) {
      // The decomposition (a differentiable backward under create_graph, or forced) reads x.
      const bool composed =
          core::grad_mode_enabled() || dispatch::decomposition_forced(OpId::max_pool2d_backward);
      const Tensor xin = ws.defined() && !composed ? shape_and_layout_of(x) : x;
      return std::vector<Tensor>{
          dispatch::call1<OpId::max_pool2d_backward>({g[0], xin, ws}, attrs)};
    });
  }
  return outs[0];
}

Tensor avg_pool2d(const Tensor& x, std::vector<int64_t> kernel, std::vector<int64_t> stride,
                  std::vector<int64_t> padding, bool count_include_pad) {
  check_input(x, "avg_pool2d");
  Pool2dAttrs attrs = window_attrs(x, "avg_pool2d", kernel, stride, padding);
  attrs.training = autograd::needs_grad({x});
  attrs.count_include_pad = count_include_pad;
  Tensor out = dispatch::call1<OpId::avg_pool2d>({x}, attrs);
  if (attrs.training)
    autograd::record("avg_pool2d", {x}, {out}, [x, attrs](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{dispatch::call1<OpId::avg_pool2d_backward>({g[0], x}, attrs)};
    });
  return out;
}

Tensor adaptive_avg_pool2d(const Tensor& x, std::vector<int64_t> output_size) {
  check_input(x, "adaptive_avg_pool2d");
  auto os = pair_option(output_size, "adaptive_avg_pool2d", "output_size", 1);
  const int64_t H = x.size(2), W = x.size(3);
  // Equal windows: a plain average pool (oneDNN in float32, e.g. ResNet's global pool).
  if (H % os[0] == 0 && W % os[1] == 0)
    return avg_pool2d(x, {H / os[0], W / os[1]}, {H / os[0], W / os[1]}, {0, 0}, true);
  const AdaptivePool2dAttrs attrs{.input_shape = x.shape(), .output_size = os};
  Tensor out = dispatch::call1<OpId::adaptive_avg_pool2d>({x}, attrs);
  if (autograd::needs_grad({x})) {
    autograd::record("adaptive_avg_pool2d", {x}, {out}, [attrs](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{
          dispatch::call1<OpId::adaptive_avg_pool2d_backward>({g[0]}, attrs)};
    });
  }
  return out;
}

}  // namespace zenith::ops
