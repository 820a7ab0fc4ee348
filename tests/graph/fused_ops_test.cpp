// Graph mode's fused ops (src/ops/fused.cpp): the CPU kernel of each equals its decomposition
// into the ops it stands for, in float32 and float64, on the cases of the op table.
#include <gtest/gtest.h>

#include "core/dispatch.h"
#include "support/op_cases.h"
#include "zenith/ops.h"

namespace zenith::graph {
namespace {

using testing::OpCase;

std::vector<Tensor> cast_all(const std::vector<Tensor>& in, DType dtype) {
  std::vector<Tensor> out;
  for (const Tensor& t : in) out.push_back(t.dtype() == DType::f64 ? t.to(dtype) : t);
  return out;
}

TEST(GraphFusedOps, KernelsEqualTheirDecompositions) {
  const OpId fused[] = {
      OpId::conv2d_relu,       OpId::batch_norm_relu,         OpId::batch_norm_relu_backward,
      OpId::fused_elementwise, OpId::multi_momentum_update,   OpId::multi_adam_update,
      OpId::add_rms_norm,      OpId::rms_norm_add_backward,   OpId::embedding_backward_add,
      OpId::max_pool2d_relu,   OpId::max_pool2d_relu_backward};
  for (OpId op : fused) {
    ASSERT_TRUE(dispatch::has_kernel(op, DeviceType::CPU)) << op_name(op);
    ASSERT_TRUE(dispatch::has_decomposition(op)) << op_name(op);
    int cases = 0;
    for (const OpCase& c : testing::op_cases()) {
      if (std::find(c.covers.begin(), c.covers.end(), op) == c.covers.end()) continue;
      ++cases;
      for (DType dtype : {DType::f64, DType::f32}) {
        SCOPED_TRACE(c.name + " in " + dtype_name(dtype));
        Tensor fast = c.fn(cast_all(c.inputs, dtype));
        Tensor composed;
        {
          dispatch::ForceDecomposition force(op);
          composed = c.fn(cast_all(c.inputs, dtype));
        }
        const double tol = dtype == DType::f64 ? 1e-10 : 1e-5;
        EXPECT_TRUE(testing::all_close(fast, composed, tol, tol));
      }
    }
    EXPECT_GT(cases, 0) << op_name(op);
  }
}

// rms_norm_add_backward against finite differences in float64: with L(x, w) = sum(dy *
// rms_norm(x, w)), its dx minus dres is dL/dx and its dweight is dL/dw.
TEST(GraphFusedOps, RmsNormAddBackwardMatchesFiniteDifferences) {
  manual_seed(5);
  const LayerNormAttrs a{.D = 6, .eps = 1e-5};
  Tensor x = Tensor::randn({4, 6}, DType::f64), w = Tensor::randn({6}, DType::f64);
  Tensor dy = Tensor::randn({4, 6}, DType::f64), dres = Tensor::randn({4, 6}, DType::f64);
  auto loss = [&](const Tensor& xv, const Tensor& wv) {
    Tensor y =
        dispatch::call<OpId::add_rms_norm>({xv, Tensor::zeros({4, 6}, DType::f64), wv}, a)[1];
    return ops::sum(ops::mul(dy, y)).item();
  };
  Tensor rstd = dispatch::call<OpId::rms_norm>({x, w}, a)[1];
  std::vector<Tensor> g = dispatch::call<OpId::rms_norm_add_backward>({dy, x, w, rstd, dres}, a);
  std::vector<double> dx = ops::sub(g[0], dres).to_double_vector(), dw = g[1].to_double_vector();
  const double h = 1e-6;
  auto numeric = [&](Tensor& t, size_t i) {
    std::vector<double> v = t.to_double_vector();
    auto at = [&](double delta) {
      std::vector<double> u = v;
      u[i] += delta;
      return Tensor::from_vector(u, t.shape(), DType::f64);
    };
    const bool is_x = &t == &x;
    const double up = is_x ? loss(at(h), w) : loss(x, at(h));
    const double down = is_x ? loss(at(-h), w) : loss(x, at(-h));
    return (up - down) / (2 * h);
  };
  for (size_t i = 0; i < dx.size(); ++i) EXPECT_NEAR(dx[i], numeric(x, i), 1e-6) << "dx " << i;
  for (size_t i = 0; i < dw.size(); ++i) EXPECT_NEAR(dw[i], numeric(w, i), 1e-6) << "dw " << i;
}

}  // namespace
}  // namespace zenith::graph
