// Gradient-accumulated hooks and queue_callback: what DistributedDataParallel builds on.
#include <gtest/gtest.h>

#include "zenith/autograd.h"
#include "zenith/ops.h"

using namespace zenith;

TEST(AutogradHooks, FireOncePerBackwardWithTheAccumulatedGradient) {
  Tensor x = Tensor::ones({2}, DType::f64).requires_grad_();
  Tensor w = Tensor::full({2}, 3.0, DType::f64).requires_grad_();
  std::vector<std::vector<double>> seen;
  auto handle = autograd::register_grad_accumulated_hook(
      x, [&](const Tensor& leaf) { seen.push_back(leaf.grad().to_double_vector()); });
  // x is used twice: the engine sums both paths (3 + 2*x = 5) before one accumulation.
  ops::sum(ops::add(ops::mul(x, w), ops::mul(x, x))).backward();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], (std::vector<double>{5, 5}));
  // A second backward without zero_grad: the hook sees the running sum.
  ops::sum(ops::mul(x, w)).backward();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1], (std::vector<double>{8, 8}));
  handle.remove();
  ops::sum(ops::mul(x, w)).backward();
  EXPECT_EQ(seen.size(), 2u);  // removed: no longer called
}

TEST(AutogradHooks, HandleDestructionRemovesTheHook) {
  Tensor x = Tensor::ones({3}).requires_grad_();
  int calls = 0;
  {
    auto h = autograd::register_grad_accumulated_hook(x, [&](const Tensor&) { ++calls; });
    ops::sum(x).backward();
  }
  ops::sum(x).backward();
  EXPECT_EQ(calls, 1);
}

TEST(AutogradHooks, QueuedCallbackRunsAfterEveryLeafHasItsGradient) {
  Tensor a = Tensor::ones({2}).requires_grad_();
  Tensor b = Tensor::ones({2}).requires_grad_();
  bool queued = false, ran = false;
  std::vector<float> a_grad, b_grad;
  auto h = autograd::register_grad_accumulated_hook(a, [&](const Tensor&) {
    if (queued) return;
    queued = true;
    autograd::queue_callback([&] {
      ran = true;
      a_grad = a.grad().to_float_vector();
      b_grad = b.grad().to_float_vector();  // b is accumulated after or before a: set either way
    });
  });
  ops::sum(ops::add(ops::mul(a, 2.0), ops::mul(b, 3.0))).backward();
  EXPECT_TRUE(ran);
  EXPECT_EQ(a_grad, (std::vector<float>{2, 2}));
  EXPECT_EQ(b_grad, (std::vector<float>{3, 3}));
}

TEST(AutogradHooks, BadUseGivesClearErrors) {
  try {
    autograd::queue_callback([] {});
    FAIL() << "queue_callback outside backward did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("only valid while backward() runs"), std::string::npos);
  }
  Tensor plain = Tensor::ones({2});
  EXPECT_THROW(autograd::register_grad_accumulated_hook(plain, [](const Tensor&) {}), Error);
  Tensor x = Tensor::ones({2}).requires_grad_();
  Tensor y = ops::mul(x, 2.0);  // not a leaf
  EXPECT_THROW(autograd::register_grad_accumulated_hook(y, [](const Tensor&) {}), Error);
}

TEST(AutogradHooks, ExceptionInAHookPropagatesAndLeavesTheEngineUsable) {
  Tensor x = Tensor::ones({2}).requires_grad_();
  auto h = autograd::register_grad_accumulated_hook(x, [](const Tensor&) {
    autograd::queue_callback([] { throw Error("[test] callback failed"); });
  });
  EXPECT_THROW(ops::sum(x).backward(), Error);
  h.remove();
  x.zero_grad();
  ops::sum(x).backward();  // no stale callback from the failed pass
  EXPECT_EQ(x.grad().to_float_vector(), (std::vector<float>{1, 1}));
  EXPECT_THROW(autograd::queue_callback([] {}), Error);  // the scope was restored
}
