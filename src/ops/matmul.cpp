// matmul (numpy semantics, broadcast batch dims) and linear; gradients are matmuls with
// transposed views, which the gemm kernels take as transpose flags instead of copies. A
// bfloat16/float16 operand (16-bit weights with float32 activations, e.g. a frozen LLaMA base)
// computes in float32 and gives float32; two 16-bit operands of one dtype give that dtype (with a
// float32 bias, linear gives float32: the sums plus the bias, not rounded to 16 bits).
#include "ops/op_utils.h"
#include "ops/weight_grad_sink.h"

namespace zenith::ops {
namespace {

// Operands of a product: float32 or float64 of one dtype, or float32 and 16-bit floats mixed.
void check_float_pair(const char* op, const Tensor& a, const Tensor& b, const char* na,
                      const char* nb) {
  ZENITH_CHECK(a.defined() && b.defined(), "[", op, "] undefined input");
  for (const Tensor* t : {&a, &b})
    ZENITH_CHECK(is_floating(t->dtype()), "[", op,
                 "] expected float32, float64, bfloat16 or float16, got ", dtype_name(t->dtype()));
  const bool f64 = a.dtype() == DType::f64 || b.dtype() == DType::f64;
  ZENITH_CHECK(a.dtype() == b.dtype() || !f64, "[", op, "] ", na, " is ", dtype_name(a.dtype()),
               " but ", nb, " is ", dtype_name(b.dtype()));
}

// A gradient in the dtype of the input it belongs to (a float32 gradient of a 16-bit weight).
Tensor as_dtype(const Tensor& g, DType dtype) {
  return g.defined() && g.dtype() != dtype ? g.to(dtype) : g;
}

// Both operands at least 2-d with matching inner dims.
Tensor matmul_nd(const Tensor& a, const Tensor& b) {
  Tensor out = dispatch::call1<OpId::matmul>({a, b});
  if (autograd::needs_grad({a, b})) {
    const bool ga = a.requires_grad(), gb = b.requires_grad();
    // Saved only where the backward reads it (PyTorch's rule): B for dA, A for dB, so a product
    // with a frozen operand keeps no activation alive.
    const Tensor saved_a = gb ? a : Tensor(), saved_b = ga ? b : Tensor();
    const Shape sa = a.shape(), sb = b.shape();
    const DType ta = a.dtype(), tb = b.dtype();
    autograd::record("matmul", {a, b}, {out}, [=](const std::vector<Tensor>& g) {
      // dA = dC B^T, dB = A^T dC, summed over broadcast batch dims.
      Tensor da = ga ? sum_to(matmul_nd(g[0], saved_b.transpose(-1, -2)), sa) : Tensor();
      Tensor db = gb ? sum_to(matmul_nd(saved_a.transpose(-1, -2), g[0]), sb) : Tensor();
      return std::vector<Tensor>{as_dtype(da, ta), as_dtype(db, tb)};
    });
  }
  return out;
}

WeightGradSink* g_weight_grad_sink = nullptr;

// dW = dy^T x for linear's backward, unless the installed sink takes it (then undefined).
Tensor weight_grad(const Tensor& dy, const Tensor& x, const Tensor& weight) {
  if (g_weight_grad_sink && g_weight_grad_sink->take(weight, dy, x)) return Tensor();
  return as_dtype(matmul(dy.t(), x), weight.dtype());
}

}  // namespace

WeightGradScope::WeightGradScope(WeightGradSink* sink) : previous_(g_weight_grad_sink) {
  g_weight_grad_sink = sink;
}
WeightGradScope::~WeightGradScope() { g_weight_grad_sink = previous_; }
WeightGradSink* weight_grad_sink() { return g_weight_grad_sink; }

Tensor matmul(const Tensor& a, const Tensor& b) {
  check_float_pair("matmul", a, b, "a", "b");
  ZENITH_CHECK(a.dim() >= 1 && b.dim() >= 1, "[matmul] expected operands of at least 1 dim, got ",
               shape_str(a.shape()), " and ", shape_str(b.shape()));
  Tensor a2 = a.dim() == 1 ? a.unsqueeze(0) : a;
  Tensor b2 = b.dim() == 1 ? b.unsqueeze(1) : b;
  ZENITH_CHECK(a2.size(-1) == b2.size(-2), "[matmul] shapes ", shape_str(a.shape()), " and ",
               shape_str(b.shape()), " do not match: ", a2.size(-1), " columns vs ", b2.size(-2),
               " rows");
  for (int64_t i = 3; i <= std::min(a2.dim(), b2.dim()); ++i) {
    int64_t da = a2.size(-i), db = b2.size(-i);
    ZENITH_CHECK(da == db || da == 1 || db == 1, "[matmul] batch dims of ", shape_str(a.shape()),
                 " and ", shape_str(b.shape()), " cannot be broadcast together");
  }
  Tensor out = matmul_nd(a2, b2);
  if (a.dim() == 1) out = out.squeeze(-2);
  if (b.dim() == 1) out = out.squeeze(-1);
  return out;
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_float_pair("linear", x, weight, "input", "weight");
  ZENITH_CHECK(weight.dim() == 2, "[linear] expected a 2-d weight [out, in], got ",
               shape_str(weight.shape()));
  ZENITH_CHECK(x.dim() >= 1, "[linear] expected an input of at least 1 dim");
  const int64_t in = weight.size(1), out_features = weight.size(0);
  ZENITH_CHECK(x.size(-1) == in, "[linear] input has ", x.size(-1), " features, weight expects ",
               in, " (input ", shape_str(x.shape()), ", weight ", shape_str(weight.shape()), ")");
  if (bias.defined()) {
    // A float32 bias with 16-bit x and weight of one dtype makes the result float32: the
    // float32 sums plus the bias, never rounded to 16 bits (amp's linear layers).
    const bool f32_result = bias.dtype() == DType::f32 && x.dtype() == weight.dtype() &&
                            (x.dtype() == DType::bf16 || x.dtype() == DType::f16);
    ZENITH_CHECK(bias.dtype() == x.dtype() || bias.dtype() == weight.dtype() || f32_result,
                 "[linear] bias is ", dtype_name(bias.dtype()), " but input is ",
                 dtype_name(x.dtype()), " and weight ", dtype_name(weight.dtype()));
    ZENITH_CHECK(bias.dim() == 1 && bias.size(0) == out_features, "[linear] expected bias [",
                 out_features, "], got ", shape_str(bias.shape()));
  }
  Tensor x2 = x.dim() == 2 ? x : x.reshape({-1, in});
  Tensor out = dispatch::call1<OpId::linear>({x2, weight, bias});
  if (autograd::needs_grad({x2, weight, bias})) {
    const bool gx = x2.requires_grad(), gw = weight.requires_grad();
    const bool gb = bias.defined() && bias.requires_grad();
    // The input is saved only for dW: a frozen weight (a LoRA base) keeps no activation alive. The
    // weight is kept for dx, or to name it to a weight-gradient sink for dW.
    const Tensor saved_x = gw ? x2 : Tensor(), saved_w = gx || gw ? weight : Tensor();
    const DType tx = x2.dtype(), tb = gb ? bias.dtype() : tx;
    autograd::record("linear", {x2, weight, bias}, {out}, [=](const std::vector<Tensor>& g) {
      // y = x W^T + b: dx = dy W, dW = dy^T x, db = sum_rows(dy)
      return std::vector<Tensor>{gx ? as_dtype(matmul(g[0], saved_w), tx) : Tensor(),
                                 gw ? weight_grad(g[0], saved_x, saved_w) : Tensor(),
                                 gb ? as_dtype(sum(g[0], {0}), tb) : Tensor()};
    });
  }
  if (x.dim() == 2) return out;
  Shape out_shape(x.shape().begin(), x.shape().end() - 1);
  out_shape.push_back(out_features);
  return out.reshape(out_shape);
}

}  // namespace zenith::ops
