// ops::momentum_update and ops::adam_update (src/ops/optimizer_update.cpp); the optimizers built
// on them are tested in tests/optim.
#include <cmath>

#include "support/op_check.h"

using namespace zenith;
using namespace zenith::testing;

TEST(OptimizerUpdate, MomentumMatchesItsFormula) {
  for (bool nesterov : {false, true}) {
    Tensor p = Tensor::from_vector(std::vector<double>{1, -2}, {2});
    Tensor g = Tensor::from_vector(std::vector<double>{0.5, 0.25}, {2});
    Tensor v = Tensor::from_vector(std::vector<double>{0.1, 0.2}, {2});
    ops::momentum_update(p, g, v, 0.1, 0.9, 0.01, nesterov);
    for (int i = 0; i < 2; ++i) {
      double p0 = i == 0 ? 1 : -2, g0 = i == 0 ? 0.5 : 0.25, v0 = i == 0 ? 0.1 : 0.2;
      double gi = g0 + 0.01 * p0, vi = 0.9 * v0 + gi;
      EXPECT_NEAR(v.to_double_vector()[size_t(i)], vi, 1e-15);
      EXPECT_NEAR(p.to_double_vector()[size_t(i)], p0 - 0.1 * (nesterov ? gi + 0.9 * vi : vi),
                  1e-15);
    }
  }
  Tensor p = Tensor::ones({2}, DType::f64);
  ops::momentum_update(p, Tensor::ones({2}, DType::f64), Tensor(), 0.5, 0.0, 0.0, false);
  EXPECT_EQ(p.to_double_vector(), (std::vector<double>{0.5, 0.5}));
}

TEST(OptimizerUpdate, AdamMatchesItsFormula) {
  Tensor p = Tensor::from_vector(std::vector<double>{1.0}, {1});
  Tensor m = Tensor::zeros({1}, DType::f64), v = Tensor::zeros({1}, DType::f64);
  ops::adam_update(p, Tensor::from_vector(std::vector<double>{0.5}, {1}), m, v, 0.1, 0.9, 0.999,
                   1e-8, 0.0, false, 1);
  // The first bias-corrected step moves by lr * g / (|g| + eps) = lr.
  EXPECT_NEAR(p.item(), 0.9, 1e-7);
  EXPECT_NEAR(m.item(), 0.05, 1e-15);
  EXPECT_NEAR(v.item(), 0.001 * 0.25, 1e-15);
}

TEST(OptimizerUpdate, Errors) {
  Tensor p = Tensor::ones({3});
  EXPECT_TRUE(throws_with(
      [&] { ops::momentum_update(p, Tensor::ones({2}), Tensor(), 0.1, 0, 0, false); },
      "[momentum_update] grad must be a contiguous float32 [3] tensor like the parameter"));
  EXPECT_TRUE(throws_with(
      [&] {
        ops::adam_update(p, Tensor::ones({3}), Tensor::zeros({3}), Tensor::zeros({3}, DType::f64),
                         0.1, 0.9, 0.999, 1e-8, 0, false, 1);
      },
      "[adam_update] moment2 must be a contiguous float32 [3] tensor like the parameter"));
  EXPECT_TRUE(throws_with(
      [&] {
        ops::adam_update(p, Tensor::ones({3}), Tensor::zeros({3}), Tensor::zeros({3}), 0.1, 0.9,
                         0.999, 1e-8, 0, false, 0);
      },
      "[adam_update] step counts from 1, got 0"));
}
