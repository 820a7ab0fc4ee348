// The step cost model behind EngineOptions::max_step_cost: the prefill tokens a step may take
// while streams decode, from given step times (no clock: the plans are deterministic).
#include <gtest/gtest.h>

#include "serve/llm/step_costs.h"

namespace zenith::serve::llm {
namespace {

constexpr double kDecode = 1e-3;  // a decode step: 1 ms

// Steps whose prefill pays a fixed half decode step, then a tenth of one a token.
StepCosts fixed_price_then_linear(int64_t up_to) {
  StepCosts costs;
  for (int i = 0; i < 5; ++i) costs.observe(kDecode, 1, 0);
  for (int64_t n = 1; n <= up_to; ++n)
    for (int i = 0; i < 3; ++i) costs.observe(kDecode * (1.5 + 0.1 * double(n)), 1, n);
  return costs;
}

TEST(LlmEngineStepCosts, AFixedPricePerPrefillStepIsCounted) {
  const StepCosts costs = fixed_price_then_linear(16);
  // 1.5 + 0.1 n <= 2.05 decode steps: 5 tokens. A cost a token from the 16-token step's time
  // beyond a decode step (2.1 / 16) would take 7, a step of 2.2 decode steps.
  EXPECT_EQ(costs.prefill_cap(16, 2.05, 0), 5);
  EXPECT_EQ(costs.prefill_cap(16, 3.05, 0), 15);
  EXPECT_EQ(costs.prefill_cap(4, 3.05, 0), 4);  // never over the budget
  EXPECT_EQ(costs.prefill_cap(16, 0, 0), 16);   // 0: the cap is off
}

TEST(LlmEngineStepCosts, WhatTheStreamWaitedComesOffTheStep) {
  const StepCosts costs = fixed_price_then_linear(16);
  // The stream's gap already took a quarter of a decode step: 1.5 + 0.1 n <= 1.75.
  EXPECT_EQ(costs.prefill_cap(16, 2.0, 0.25 * kDecode), 2);
  // Nothing fits: a token while the stream waited under a decode step, none after one.
  EXPECT_EQ(costs.prefill_cap(16, 1.5, 0.2 * kDecode), 1);
  EXPECT_EQ(costs.prefill_cap(16, 2.0, 1.2 * kDecode), 0);
}

TEST(LlmEngineStepCosts, UnseenCountsAreScaledFromTheLargestSeen) {
  StepCosts costs;
  EXPECT_EQ(costs.prefill_cap(16, 2.0, 0), 1);  // no decode step timed: a token a step
  costs.observe(kDecode, 1, 0);
  EXPECT_EQ(costs.prefill_cap(16, 2.0, 0), 2);  // until a prefill step is timed: half a decode
  costs.observe(1.2 * kDecode, 1, 2);
  // 2 tokens cost 0.2 decode steps, 8 would cost 0.8: but at most twice the largest seen.
  EXPECT_EQ(costs.prefill_cap(16, 2.0, 0), 4);
  EXPECT_NEAR(costs.expected(8), 1.8, 1e-9);
  costs.observe(1.0 * kDecode, 0, 4);  // a prefill-only step delays no stream: not counted
  EXPECT_EQ(costs.prefill_cap(16, 2.0, 0), 4);
}

TEST(LlmEngineStepCosts, ALargerCountNeverLooksCheaper) {
  StepCosts costs;
  costs.observe(kDecode, 1, 0);
  costs.observe(1.9 * kDecode, 1, 4);
  costs.observe(1.5 * kDecode, 1, 8);  // a fast step (the host's noise)
  EXPECT_NEAR(costs.expected(8), 1.9, 1e-9);
  EXPECT_EQ(costs.prefill_cap(16, 1.8, 0), 1);  // nothing fits: the floor
  EXPECT_EQ(costs.prefill_cap(16, 2.0, 0), 8);  // 9 scaled from 8: 1 + 0.9 * 9 / 8 > 2
}

TEST(LlmEngineStepCosts, TheHostsUsualNoiseComesOffTheStep) {
  StepCosts costs = fixed_price_then_linear(16);
  for (int i = 0; i < 8; ++i) costs.observe(kDecode, 1, 0);
  // 2 of the 15 latest decode steps took 1.5 ms: a step may meet half a decode step of noise.
  for (int i = 0; i < 2; ++i) costs.observe(1.5 * kDecode, 1, 0);
  EXPECT_DOUBLE_EQ(costs.decode_step(), kDecode);
  EXPECT_EQ(costs.prefill_cap(16, 2.55, 0), 5);  // 1.5 + 0.1 n <= 2.55 - 0.5
  EXPECT_EQ(costs.prefill_cap(16, 2.05, 0), 1);  // nothing fits: the floor
}

TEST(LlmEngineStepCosts, MediansOfRecentStepsNotMeans) {
  StepCosts costs;
  for (int i = 0; i < 14; ++i) costs.observe(kDecode, 1, 0);
  costs.observe(20 * kDecode, 1, 0);  // the host descheduled the engine once in 15 steps
  for (int i = 0; i < 3; ++i) costs.observe(1.5 * kDecode, 1, 4);
  EXPECT_DOUBLE_EQ(costs.decode_step(), kDecode);
  EXPECT_EQ(costs.prefill_cap(16, 2.05, 0), 8);  // 4 tokens: half a decode step
}

TEST(LlmEngineStepCosts, ASlowCountIsForgottenAndTriedAgain) {
  StepCosts costs;
  costs.observe(kDecode, 1, 0);
  costs.observe(3 * kDecode, 1, 4);  // slow once: 1 to 4 tokens look like 3 decode steps
  EXPECT_EQ(costs.prefill_cap(16, 2.0, 0), 1);
  for (int64_t i = 0; i < StepCosts::kForgetAfter; ++i) costs.observe(kDecode, 1, 0);
  EXPECT_EQ(costs.prefill_cap(16, 2.0, 0), 1);
  costs.observe(kDecode, 1, 0);
  EXPECT_EQ(costs.prefill_cap(16, 2.0, 0), 2);  // unseen again: half a decode step a token
}

}  // namespace
}  // namespace zenith::serve::llm
