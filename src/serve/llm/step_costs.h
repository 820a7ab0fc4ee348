// The engine's step cost model behind EngineOptions::max_step_cost: how many prompt tokens a step
// may prefill while streams decode, from the times of recent steps.
//
// A step's time is not linear in its prefill tokens: a step with any prefill pays a fixed price
// on top of its decodes (the kernels of a many-row step, the prompt's attention), and on a small
// model the host's noise is of a decode step's size. So the model keeps, per prefill count, the
// median of that count's recent steps in decode steps (a ratio, which outlives a change of the
// host's load), and takes the largest count whose step it expects within max_step_cost decode
// steps, at most twice the largest count it has seen. A count not seen for kForgetAfter steps
// is forgotten: a slow sample (the host's noise) would otherwise keep the cap under it for good.
#pragma once

#include <array>
#include <cstdint>
#include <map>

namespace zenith::serve::llm {

// The median of the latest samples (a mean let one step the host descheduled, or one that ran
// fast, move the cap for many steps).
class RecentMedian {
 public:
  void add(double sample);
  double median() const { return quantile(0.5); }  // 0 until a sample was added
  double quantile(double q) const;                 // the sample at q of the sorted ones

 private:
  std::array<double, 15> samples_{};
  int count_ = 0, next_ = 0;
};

class StepCosts {
 public:
  static constexpr int64_t kForgetAfter = 256;  // steps with decodes
  // A step's time in seconds, its decoded tokens and its prefilled (prompt) tokens.
  void observe(double seconds, int64_t decodes, int64_t prefill_tokens);
  // Prompt tokens a step may prefill while streams decode, in [0, budget]: the largest count
  // whose step is expected within max_step_cost decode steps less `waited` (seconds since the
  // longest-waiting stream's last token: what its gap already took) and less the host's noise
  // (a slow decode step's time over the median one's: the 90th percentile of the recent ones),
  // so a step that meets the usual noise still keeps the gap. At least 1 while that stream
  // waited under a decode step (a prompt always progresses), else 0.
  int64_t prefill_cap(int64_t budget, double max_step_cost, double waited) const;
  // A step's expected time in decode steps with `prefill` tokens on top of its decodes: the
  // median seen for the least count at or above it (never under one seen below it), else
  // scaled up from the largest seen (its part beyond a decode step in proportion, which
  // overstates a fixed price: safe); half a decode step a token until any was seen.
  double expected(int64_t prefill) const;
  double decode_step() const { return decode_.median(); }  // seconds; 0 until one was timed

 private:
  struct Seen {
    RecentMedian ratios;  // steps' times over the decode step's
    int64_t last = 0;     // the step it was last seen at
  };
  RecentMedian decode_;
  std::map<int64_t, Seen> prefill_;  // by prefill tokens
  int64_t steps_ = 0;                // steps with decodes observed
};

}  // namespace zenith::serve::llm
