// 2-d pooling over NCHW: max (gradient through the saved argmax / oneDNN workspace), average
// (count_include_pad as in PyTorch) and adaptive average (an average pool when the sizes divide).
#include "core/dispatch.h"
#include "zenith/autograd.h"
#include "zenith/ops.h"

namespace zenith::ops {
namespace {

std::vector<int64_t> pair_of(const std::vector<int64_t>& v, const char* op, const char* name,
                             int64_t min) {
  ZENITH_CHECK(v.size() == 1 || v.size() == 2, "[", op, "] ", name, " needs 1 or 2 values, got ",
               shape_str(v));
  std::vector<int64_t> out = v.size() == 1 ? std::vector<int64_t>{v[0], v[0]} : v;
  for (auto x : out)
    ZENITH_CHECK(x >= min, "[", op, "] ", name, " must be >= ", min, ", got ", shape_str(v));
  return out;
}

void check_input(const Tensor& x, const char* op) {
  ZENITH_CHECK(x.defined(), "[", op, "] undefined input");
  ZENITH_CHECK(x.dim() == 4, "[", op, "] expected a 4-d input [N, C, H, W], got ",
               shape_str(x.shape()));
  ZENITH_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::f64, "[", op,
               "] expected float32 or float64, got ", dtype_name(x.dtype()));
}

// Validated kernel/stride/padding attributes (stride defaults to the kernel size).
dispatch::Attrs window_attrs(const Tensor& x, const char* op, const std::vector<int64_t>& kernel_in,
                             const std::vector<int64_t>& stride_in,
                             const std::vector<int64_t>& padding_in) {
  auto kernel = pair_of(kernel_in, op, "kernel", 1);
  auto stride = stride_in.empty() ? kernel : pair_of(stride_in, op, "stride", 1);
  auto padding = pair_of(padding_in, op, "padding", 0);
  for (size_t i = 0; i < 2; ++i) {
    ZENITH_CHECK(2 * padding[i] <= kernel[i], "[", op, "] padding ", shape_str(padding),
                 " must be at most half the kernel ", shape_str(kernel));
    ZENITH_CHECK(x.shape()[2 + i] + 2 * padding[i] >= kernel[i], "[", op, "] input ",
                 shape_str(x.shape()), " is smaller than the kernel ", shape_str(kernel));
  }
  return {{"kernel", kernel}, {"stride", stride}, {"padding", padding}};
}

}  // namespace

Tensor max_pool2d(const Tensor& x, std::vector<int64_t> kernel, std::vector<int64_t> stride,
                  std::vector<int64_t> padding) {
  check_input(x, "max_pool2d");
  dispatch::Attrs attrs = window_attrs(x, "max_pool2d", kernel, stride, padding);
  bool grad = autograd::needs_grad({x});
  attrs.set("training", grad);
  auto outs = dispatch::call("max_pool2d", {x}, attrs);
  if (grad) {
    Tensor ws = outs[1];
    autograd::record("max_pool2d", {x}, {outs[0]}, [x, ws, attrs](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{dispatch::call1("max_pool2d_backward", {g[0], x, ws}, attrs)};
    });
  }
  return outs[0];
}

Tensor avg_pool2d(const Tensor& x, std::vector<int64_t> kernel, std::vector<int64_t> stride,
                  std::vector<int64_t> padding, bool count_include_pad) {
  check_input(x, "avg_pool2d");
  dispatch::Attrs attrs = window_attrs(x, "avg_pool2d", kernel, stride, padding);
  bool grad = autograd::needs_grad({x});
  attrs.set("training", grad);
  attrs.set("count_include_pad", count_include_pad);
  Tensor out = dispatch::call1("avg_pool2d", {x}, attrs);
  if (grad)
    autograd::record("avg_pool2d", {x}, {out}, [x, attrs](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{dispatch::call1("avg_pool2d_backward", {g[0], x}, attrs)};
    });
  return out;
}

Tensor adaptive_avg_pool2d(const Tensor& x, std::vector<int64_t> output_size) {
  check_input(x, "adaptive_avg_pool2d");
  auto os = pair_of(output_size, "adaptive_avg_pool2d", "output_size", 1);
  const int64_t H = x.size(2), W = x.size(3);
  // Equal windows: a plain average pool (oneDNN in float32, e.g. ResNet's global pool).
  if (H % os[0] == 0 && W % os[1] == 0)
    return avg_pool2d(x, {H / os[0], W / os[1]}, {H / os[0], W / os[1]}, {0, 0}, true);
  Tensor out = dispatch::call1("adaptive_avg_pool2d", {x}, {{"output_size", os}});
  if (autograd::needs_grad({x})) {
    Shape in_shape = x.shape();
    autograd::record("adaptive_avg_pool2d", {x}, {out}, [in_shape](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{
          dispatch::call1("adaptive_avg_pool2d_backward", {g[0]}, {{"input_shape", in_shape}})};
    });
  }
  return out;
}

}  // namespace zenith::ops
