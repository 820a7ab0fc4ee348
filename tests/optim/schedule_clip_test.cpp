// LR schedules at key steps; gradient clipping.
#include <cmath>

#include "support/op_check.h"

using namespace zenith;
using namespace zenith::testing;

TEST(Schedule, Constant) {
  auto s = nn::constant_lr(0.1);
  EXPECT_DOUBLE_EQ(s(0), 0.1);
  EXPECT_DOUBLE_EQ(s(100000), 0.1);
}

TEST(Schedule, WarmupCosine) {
  auto s = nn::warmup_cosine_lr(1.0, 10, 110, 0.1);
  EXPECT_DOUBLE_EQ(s(0), 0.0);
  EXPECT_DOUBLE_EQ(s(5), 0.5);
  EXPECT_DOUBLE_EQ(s(10), 1.0);                // peak at the end of warmup
  EXPECT_NEAR(s(60), 0.1 + 0.9 * 0.5, 1e-12);  // halfway: cos(pi/2) = 0
  EXPECT_NEAR(s(35), 0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * 0.25)), 1e-12);
  EXPECT_NEAR(s(110), 0.1, 1e-12);
  EXPECT_NEAR(s(1000), 0.1, 1e-12);  // stays at min_lr
  auto nowarm = nn::warmup_cosine_lr(2.0, 0, 100);
  EXPECT_DOUBLE_EQ(nowarm(0), 2.0);
  EXPECT_TRUE(throws_with([] { nn::warmup_cosine_lr(1.0, 20, 10); }, "[warmup_cosine_lr]"));
}

TEST(Schedule, WarmupStableDecay) {
  auto s = nn::warmup_stable_decay_lr(1.0, 10, 50, 100, 0.2);
  EXPECT_DOUBLE_EQ(s(0), 0.0);
  EXPECT_DOUBLE_EQ(s(5), 0.5);
  EXPECT_DOUBLE_EQ(s(10), 1.0);
  EXPECT_DOUBLE_EQ(s(49), 1.0);  // stable until the decay starts
  EXPECT_DOUBLE_EQ(s(50), 1.0);
  EXPECT_NEAR(s(75), 0.6, 1e-12);  // halfway down to min_lr
  EXPECT_NEAR(s(99), 1.0 - 0.8 * 49.0 / 50.0, 1e-12);
  EXPECT_DOUBLE_EQ(s(100), 0.2);
  EXPECT_DOUBLE_EQ(s(1000), 0.2);
  auto plain = nn::warmup_stable_decay_lr(0.01, 0, 90, 100);
  EXPECT_DOUBLE_EQ(plain(0), 0.01);
  EXPECT_NEAR(plain(95), 0.005, 1e-15);
  EXPECT_DOUBLE_EQ(plain(100), 0.0);
  EXPECT_TRUE(throws_with([] { nn::warmup_stable_decay_lr(1.0, 20, 10, 30); },
                          "[warmup_stable_decay_lr] expected 0 <= warmup_steps <= decay_start"));
  EXPECT_TRUE(throws_with([] { nn::warmup_stable_decay_lr(1.0, 0, 10, 30, 2.0); },
                          "[warmup_stable_decay_lr] expected 0 <= min_lr <= base_lr"));
}

TEST(Schedule, Step) {
  auto s = nn::step_lr(0.1, 30, 0.1);
  EXPECT_DOUBLE_EQ(s(0), 0.1);
  EXPECT_DOUBLE_EQ(s(29), 0.1);
  EXPECT_NEAR(s(30), 0.01, 1e-15);
  EXPECT_NEAR(s(65), 0.001, 1e-15);
}

TEST(Schedule, Piecewise) {
  auto s = nn::piecewise_constant_lr({5, 10}, {1.0, 0.5, 0.25});
  EXPECT_DOUBLE_EQ(s(0), 1.0);
  EXPECT_DOUBLE_EQ(s(4), 1.0);
  EXPECT_DOUBLE_EQ(s(5), 0.5);
  EXPECT_DOUBLE_EQ(s(9), 0.5);
  EXPECT_DOUBLE_EQ(s(10), 0.25);
  EXPECT_DOUBLE_EQ(s(1000), 0.25);
  EXPECT_TRUE(throws_with([] { nn::piecewise_constant_lr({5}, {1.0}); }, "expected 2 values"));
  EXPECT_TRUE(throws_with([] { nn::piecewise_constant_lr({5, 5}, {1, 2, 3}); }, "must increase"));
}

TEST(Schedule, OptimizerFollowsSchedule) {
  Tensor p = Tensor::zeros({1});
  p.requires_grad_();
  auto opt = nn::SGD({p}, 1.0);
  opt->set_lr(nn::piecewise_constant_lr({1}, {1.0, 0.1}));
  for (int i = 0; i < 3; ++i) {
    p.set_grad(Tensor::ones({1}));
    opt->step();
  }
  EXPECT_NEAR(p.item(), -1.2, 1e-6);
  EXPECT_DOUBLE_EQ(opt->current_lr(), 0.1);
}

TEST(Clip, ScalesToMaxNorm) {
  Tensor a = Tensor::zeros({2}), b = Tensor::zeros({1}), c = Tensor::zeros({1});
  for (Tensor* t : {&a, &b, &c}) t->requires_grad_();
  a.set_grad(Tensor::from_vector(std::vector<float>{3, 0}, {2}));
  b.set_grad(Tensor::from_vector(std::vector<float>{4}, {1}));
  double norm = nn::clip_grad_norm({a, b, c}, 1.0);  // c has no grad
  EXPECT_NEAR(norm, 5.0, 1e-6);
  EXPECT_NEAR(a.grad().to_double_vector()[0], 3.0 / 5.0, 1e-6);
  EXPECT_NEAR(b.grad().to_double_vector()[0], 4.0 / 5.0, 1e-6);
  // Below the limit: unchanged.
  double again = nn::clip_grad_norm({a, b}, 2.0);
  EXPECT_NEAR(again, 1.0, 1e-5);
  EXPECT_NEAR(b.grad().to_double_vector()[0], 0.8, 1e-6);
  EXPECT_TRUE(throws_with([&] { nn::clip_grad_norm({a}, 0.0); }, "[clip_grad_norm]"));
}

// The ops-only clipping (graph mode) scales as clip_grad_norm does and reads nothing on the host.
TEST(Clip, WithOpsOnlyEqualsTheHostVersion) {
  Tensor a = Tensor::zeros({2}), b = Tensor::zeros({1}), c = Tensor::zeros({1});
  for (Tensor* t : {&a, &b, &c}) t->requires_grad_();
  a.set_grad(Tensor::from_vector(std::vector<float>{3, 0}, {2}));
  b.set_grad(Tensor::from_vector(std::vector<float>{4}, {1}));
  Tensor norm = nn::clip_grad_norm_ops({a, b, c}, 1.0);  // c has no grad
  EXPECT_EQ(norm.dim(), 0);
  EXPECT_NEAR(norm.item(), 5.0, 1e-6);
  EXPECT_NEAR(a.grad().to_double_vector()[0], 3.0 / 5.0, 1e-6);
  EXPECT_NEAR(b.grad().to_double_vector()[0], 4.0 / 5.0, 1e-6);
  // Below the limit: unchanged (scaled by exactly 1).
  const std::vector<double> before = b.grad().to_double_vector();
  EXPECT_NEAR(nn::clip_grad_norm_ops({a, b}, 2.0).item(), 1.0, 1e-5);
  EXPECT_EQ(b.grad().to_double_vector(), before);
  EXPECT_NEAR(nn::clip_grad_norm_ops({c}, 1.0).item(), 0.0, 0.0);  // no gradients: norm 0
  EXPECT_TRUE(throws_with([&] { nn::clip_grad_norm_ops({a}, 0.0); }, "[clip_grad_norm]"));
}
