// SwiGLU, the LLaMA MLP's activation: silu(gate) * up in one pass. Its gradient is the op
// swiglu_backward, defined here by a decomposition into ops; the CPU fuses both.
#include "ops/op_utils.h"

namespace zenith::ops {
namespace {

constexpr const char* kOp = "swiglu";

// swiglu_backward(dy, gate, up) -> {dgate, dup}:
// dgate = dy up s (1 + gate (1 - s)), dup = dy gate s, s = sigmoid(gate).
std::vector<Tensor> swiglu_backward_composed(const std::vector<Tensor>& in, const NoAttrs&) {
  const Tensor &dy = in[0], &gate = in[1], &up = in[2];
  Tensor s = sigmoid(gate);
  Tensor dgate = mul(mul(dy, up), mul(s, add(mul(gate, 1.0 - s), 1.0)));
  return {dgate, mul(dy, mul(gate, s))};
}

ZENITH_REGISTER_DECOMPOSITION(swiglu_backward, swiglu_backward_composed);

bool low_precision(DType t) { return t == DType::bf16 || t == DType::f16; }

}  // namespace

Tensor swiglu(const Tensor& gate_in, const Tensor& up_in) {
  ZENITH_CHECK(gate_in.defined() && up_in.defined(), "[", kOp, "] undefined input");
  ZENITH_CHECK(gate_in.dtype() == up_in.dtype(), "[", kOp, "] gate is ",
               dtype_name(gate_in.dtype()), " but up is ", dtype_name(up_in.dtype()));
  ZENITH_CHECK(gate_in.shape() == up_in.shape(), "[", kOp, "] gate ", shape_str(gate_in.shape()),
               " and up ", shape_str(up_in.shape()), " differ in shape");
  if (low_precision(gate_in.dtype()))  // float32 compute, the result in the inputs' dtype
    return swiglu(gate_in.to(DType::f32), up_in.to(DType::f32)).to(gate_in.dtype());
  detail::check_float(gate_in, kOp);
  Tensor gate = detail::plain(gate_in), up = detail::plain(up_in);
  Tensor out = dispatch::call1<OpId::swiglu>({gate, up});
  if (autograd::needs_grad({gate, up})) {
    bool gg = gate.requires_grad(), gu = up.requires_grad();
    autograd::record(kOp, {gate, up}, {out}, [=](const std::vector<Tensor>& g) {
      auto d = dispatch::call<OpId::swiglu_backward>({g[0], gate, up});
      return std::vector<Tensor>{gg ? d[0] : Tensor(), gu ? d[1] : Tensor()};
    });
  }
  return out;
}

}  // namespace zenith::ops
