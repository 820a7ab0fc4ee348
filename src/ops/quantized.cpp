// A linear layer on a weight held as GGML blocks (include/zenith/quant.h): validates, then
// dispatches quantized_linear; the CPU kernels are in src/backend/cpu/quant_*.cpp.
#include "ops/op_utils.h"
#include "zenith/quant.h"

namespace zenith::ops {
namespace {

constexpr const char* kOp = "quantized_linear";

}  // namespace

Tensor quantized_linear(const Tensor& x_in, const QuantizedWeight& weight) {
  ZENITH_CHECK(x_in.defined(), "[", kOp, "] undefined input");
  check_quantized_weight(weight, kOp);
  ZENITH_CHECK(x_in.dim() >= 1 && x_in.size(-1) == weight.in_features, "[", kOp, "] input ",
               shape_str(x_in.shape()), " does not end in the weight's ", weight.in_features,
               " input features");
  Tensor x = x_in;
  if (x.dtype() == DType::bf16 || x.dtype() == DType::f16) x = x.to(DType::f32);
  ZENITH_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::f64, "[", kOp,
               "] expected a float input, got ", dtype_name(x.dtype()));
  x = detail::plain(x).contiguous();
  const QuantizedLinearAttrs attrs{int64_t(weight.format), weight.out_features, weight.in_features};
  Tensor out = dispatch::call1<OpId::quantized_linear>({x, weight.blocks.contiguous()}, attrs);
  if (autograd::needs_grad({x})) {
    QuantizedWeight w = weight;
    autograd::record(kOp, {x}, {out}, [w](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{matmul(g[0], dequantize_weight(w).to(g[0].dtype()))};
    });
  }
  return out;
}

}  // namespace zenith::ops
