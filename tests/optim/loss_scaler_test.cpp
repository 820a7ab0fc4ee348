// DynamicLossScaler's state machine with injected infs and NaNs: overflow -> skip and halve;
// growth after the window of clean steps; gradients unscaled.
#include "zenith/loss_scaler.h"

#include <gtest/gtest.h>

#include <cmath>

#include "zenith/ops.h"

namespace zenith::testing {
namespace {

Tensor param_with_grad(std::vector<float> grad) {
  Tensor p = Tensor::zeros({int64_t(grad.size())});
  p.requires_grad_(true);
  p.set_grad(Tensor::from_vector(grad, {int64_t(grad.size())}));
  return p;
}

TEST(DynamicLossScaler, DefaultsAsTheIssueAsks) {
  nn::DynamicLossScaler s;
  EXPECT_EQ(s.scale(), 65536.0);
  for (int i = 0; i < 1999; ++i) ASSERT_TRUE(s.update(false));
  EXPECT_EQ(s.scale(), 65536.0);
  EXPECT_EQ(s.clean_steps(), 1999);
  EXPECT_TRUE(s.update(false));
  EXPECT_EQ(s.scale(), 131072.0) << "x2 after 2000 clean steps";
  EXPECT_EQ(s.clean_steps(), 0);
}

TEST(DynamicLossScaler, OverflowSkipsAndHalvesAndRestartsTheWindow) {
  nn::DynamicLossScaler s(1024, 2, 0.5, /*growth_interval=*/3, /*min_scale=*/256);
  Tensor ok = param_with_grad({2048, -1024});
  EXPECT_FALSE(s.unscale({ok}));
  EXPECT_EQ(ok.grad().to_double_vector(), (std::vector<double>{2, -1}));
  EXPECT_TRUE(s.update(false));
  EXPECT_TRUE(s.update(false));

  Tensor inf = param_with_grad({1, INFINITY});
  EXPECT_TRUE(s.unscale({ok, inf}));
  EXPECT_FALSE(s.update(true)) << "skip the step";
  EXPECT_EQ(s.scale(), 512);
  EXPECT_EQ(s.clean_steps(), 0) << "two clean steps before the overflow do not count";
  Tensor nan = param_with_grad({NAN, 1});
  EXPECT_FALSE(s.unscale_and_update({nan}));
  EXPECT_EQ(s.scale(), 256);
  EXPECT_FALSE(s.update(true));
  EXPECT_EQ(s.scale(), 256) << "not below min_scale";

  EXPECT_TRUE(s.update(false));
  EXPECT_TRUE(s.update(false));
  EXPECT_EQ(s.scale(), 256);
  EXPECT_TRUE(s.update(false));
  EXPECT_EQ(s.scale(), 512) << "growth after 3 clean steps";

  nn::DynamicLossScaler restored(1);
  restored.load_state_dict(s.state_dict());
  EXPECT_EQ(restored.scale(), 512);
  EXPECT_EQ(restored.clean_steps(), 0);
  EXPECT_EQ(s.scale_loss(Tensor::scalar(0.5)).item(), 256);
}

TEST(DynamicLossScaler, BadSettingsAreErrors) {
  EXPECT_THROW(nn::DynamicLossScaler(0), Error);
  EXPECT_THROW(nn::DynamicLossScaler(1024, 1.0), Error);
  EXPECT_THROW(nn::DynamicLossScaler(1024, 2, 1.5), Error);
}

}  // namespace
}  // namespace zenith::testing
