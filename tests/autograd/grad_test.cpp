// autograd::grad and create_graph: gradients returned instead of accumulated, and gradients
// that can be differentiated again (the gradient ops then run as their decompositions).
#include <set>

#include "core/dispatch.h"
#include "support/op_check.h"

using namespace zenith;
using namespace zenith::testing;

namespace {
Tensor values(std::vector<double> v) { return Tensor::from_vector(v, {int64_t(v.size())}); }
}  // namespace

TEST(Grad, ReturnsGradientsWithoutAccumulating) {
  Tensor x = values({1, 2, 3}).requires_grad_();
  Tensor y = ops::sum(ops::mul(ops::mul(x, x), 3.0));
  auto g = autograd::grad({y}, {x});
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].to_double_vector(), (std::vector<double>{6, 12, 18}));
  EXPECT_FALSE(x.grad().defined());
  EXPECT_FALSE(g[0].requires_grad());
}

TEST(Grad, IntermediatesUnreachableInputsAndGradOutputs) {
  Tensor x = values({1, 2}).requires_grad_();
  Tensor unused = values({5}).requires_grad_();
  Tensor h = ops::mul(x, 2.0);
  Tensor y = ops::mul(h, h);
  auto g = autograd::grad({y}, {h, x, unused}, {values({1, 10})});
  EXPECT_EQ(g[0].to_double_vector(), (std::vector<double>{4, 80}));  // 2 h dy
  EXPECT_EQ(g[1].to_double_vector(), (std::vector<double>{8, 160}));
  EXPECT_FALSE(g[2].defined());
  EXPECT_TRUE(throws_with([&] { autograd::grad({y}, {x}); },
                          "[grad] grad_outputs can be implied only for scalar outputs"));
  EXPECT_TRUE(throws_with([&] { autograd::grad({ops::sum(y)}, {values({1})}); },
                          "[grad] input 0 does not require grad"));
}

TEST(Grad, CreateGraphGivesSecondDerivatives) {
  Tensor x = values({1, -2, 0.5}).requires_grad_();
  Tensor y = ops::sum(ops::mul(ops::square(x), x));  // sum x^3
  auto g = autograd::grad({y}, {x}, {}, /*create_graph=*/true);
  EXPECT_TRUE(g[0].requires_grad());
  EXPECT_TRUE(all_close(g[0], values({3, 12, 0.75}), 1e-12, 0));
  auto gg = autograd::grad({ops::sum(g[0])}, {x});
  EXPECT_TRUE(all_close(gg[0], values({6, -12, 3}), 1e-12, 0));
}

TEST(Backward, CreateGraphAccumulatesADifferentiableGradient) {
  Tensor x = values({1, 2}).requires_grad_();
  ops::sum(ops::tanh(x)).backward(Tensor(), false, /*create_graph=*/true);
  Tensor g = x.grad();
  ASSERT_TRUE(g.defined());
  EXPECT_TRUE(g.requires_grad());
  auto gg = autograd::grad({ops::sum(g)}, {x});
  // d/dx (1 - tanh^2 x) = -2 tanh x (1 - tanh^2 x)
  auto xv = x.to_double_vector();
  for (size_t i = 0; i < xv.size(); ++i) {
    double t = std::tanh(xv[i]);
    EXPECT_NEAR(gg[0].to_double_vector()[i], -2 * t * (1 - t * t), 1e-12);
  }
}

TEST(Backward, FusedGradientKernelsRunUnlessTheGradientIsRecorded) {
  struct Paths {
    std::set<OpId> kernel, decomposed;
  } paths;
  int id = dispatch::add_observer(
      [](void* user, const dispatch::OpEvent& e) {
        auto* p = static_cast<Paths*>(user);
        (e.decomposed ? p->decomposed : p->kernel).insert(e.op);
      },
      &paths);
  Tensor x = Tensor::randn({3, 4}, DType::f64).requires_grad_();
  ops::sum(ops::relu(x)).backward();
  EXPECT_TRUE(paths.kernel.count(OpId::relu_backward));
  EXPECT_FALSE(paths.decomposed.count(OpId::relu_backward));
  paths = {};
  autograd::grad({ops::sum(ops::relu(x))}, {x}, {}, /*create_graph=*/true);
  EXPECT_TRUE(paths.decomposed.count(OpId::relu_backward));
  EXPECT_FALSE(paths.kernel.count(OpId::relu_backward));
  dispatch::remove_observer(id);
}
