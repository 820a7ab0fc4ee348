// The harness itself must catch wrong gradients and wrong forwards.
#include "support/op_check.h"

using namespace zenith;
using namespace zenith::testing;

namespace {
// y = 2x forward, but a gradient of 3 recorded on purpose.
Tensor wrong_double(const Tensor& x) {
  Tensor out = ops::mul(x.detach(), 2.0);
  if (autograd::needs_grad({x}))
    autograd::record("wrong_double", {x}, {out}, [](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{ops::mul(g[0], 3.0)};
    });
  return out;
}
}  // namespace

TEST(Gradcheck, DetectsWrongGradient) {
  Tensor x = random_input({4}, DType::f64).requires_grad_();
  EXPECT_FALSE(gradcheck([](auto& in) { return wrong_double(in[0]); }, {x}));
  EXPECT_TRUE(gradcheck([](auto& in) { return ops::mul(in[0], 2.0); }, {x}));
}

TEST(Gradcheck, DetectsWrongForward) {
  Tensor x = random_input({4}, DType::f64);
  // A float32 result that differs from the float64 one by more than rounding.
  auto f = [](const std::vector<Tensor>& in) {
    return in[0].dtype() == DType::f32 ? ops::add(in[0], 1e-2) : in[0];
  };
  EXPECT_FALSE(forward_matches_f64(f, {x}));
}

TEST(Autograd, RetainGraphAndFreedGraphError) {
  Tensor x = Tensor::ones({2}, DType::f64).requires_grad_();
  Tensor y = ops::sum(ops::mul(x, x));
  autograd::backward({y}, {Tensor::ones({}, DType::f64)}, /*retain_graph=*/true);
  y.backward();
  EXPECT_EQ(x.grad().to_double_vector(), (std::vector<double>{4, 4}));
  EXPECT_TRUE(throws_with([&] { y.backward(); }, "already freed"));
}

TEST(Autograd, RetainGradOnIntermediate) {
  Tensor x = Tensor::ones({3}, DType::f64).requires_grad_();
  Tensor h = ops::mul(x, 3.0);
  h.retain_grad();
  ops::sum(ops::mul(h, h)).backward();
  EXPECT_EQ(h.grad().to_double_vector(), (std::vector<double>{6, 6, 6}));
  EXPECT_EQ(x.grad().to_double_vector(), (std::vector<double>{18, 18, 18}));
}

namespace {
// y = x^3 whose recorded gradient 3 x^2 dy uses x detached: right to first order, but its own
// gradient with respect to x is lost.
Tensor cube_with_flat_gradient(const Tensor& x) {
  Tensor out = ops::mul(ops::square(x.detach()), x.detach());
  if (autograd::needs_grad({x}))
    autograd::record("cube", {x}, {out}, [x](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{ops::mul(ops::mul(ops::square(x.detach()), 3.0), g[0])};
    });
  return out;
}
}  // namespace

TEST(Gradcheck, DetectsWrongSecondDerivative) {
  Tensor x = random_input({4}, DType::f64).requires_grad_();
  auto flat = [](const std::vector<Tensor>& in) { return cube_with_flat_gradient(in[0]); };
  auto cube = [](const std::vector<Tensor>& in) { return ops::mul(ops::square(in[0]), in[0]); };
  EXPECT_TRUE(gradcheck(flat, {x}));
  EXPECT_FALSE(gradgradcheck(flat, {x}));
  EXPECT_TRUE(gradgradcheck(cube, {x}));
}
