#include "serve/llm/step_costs.h"

#include <algorithm>

namespace zenith::serve::llm {

void RecentMedian::add(double sample) {
  samples_[size_t(next_)] = sample;
  next_ = (next_ + 1) % int(samples_.size());
  count_ = std::min(count_ + 1, int(samples_.size()));
}

double RecentMedian::quantile(double q) const {
  if (count_ == 0) return 0;
  std::array<double, 15> sorted = samples_;
  std::sort(sorted.begin(), sorted.begin() + count_);
  return sorted[std::min(size_t(double(count_) * q), size_t(count_ - 1))];
}

void StepCosts::observe(double seconds, int64_t decodes, int64_t prefill_tokens) {
  if (decodes == 0) return;  // a prefill-only step delays no stream
  ++steps_;
  if (prefill_tokens == 0) {
    decode_.add(seconds);
  } else if (decode_.median() > 0) {
    Seen& seen = prefill_[prefill_tokens];
    seen.ratios.add(seconds / decode_.median());
    seen.last = steps_;
  }
  std::erase_if(prefill_, [&](const auto& p) { return steps_ - p.second.last > kForgetAfter; });
}

double StepCosts::expected(int64_t prefill) const {
  if (prefill <= 0) return 1;
  if (prefill_.empty()) return 1 + double(prefill) / 2;
  double most = 0;  // the largest median up to here: a step's time grows with its tokens
  for (const auto& [count, seen] : prefill_) {
    most = std::max(most, seen.ratios.median());
    if (count >= prefill) return most;
  }
  const int64_t largest = prefill_.rbegin()->first;
  return 1 + std::max(most - 1, 0.0) * double(prefill) / double(largest);
}

int64_t StepCosts::prefill_cap(int64_t budget, double max_step_cost, double waited) const {
  if (max_step_cost <= 0) return budget;
  const double decode = decode_.median();
  if (decode <= 0) return 1;  // no decode step timed yet: a token a step until one is
  const double noise = decode_.quantile(0.9) - decode;
  const double limit = max_step_cost - (waited + noise) / decode;
  const int64_t most = prefill_.empty() ? budget : 2 * prefill_.rbegin()->first;
  // expected() grows with the count: bisect for the largest within the limit.
  int64_t lo = 0, hi = std::min(budget, most);
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (expected(mid) <= limit)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo == 0 && waited < decode ? std::min<int64_t>(1, budget) : lo;
}

}  // namespace zenith::serve::llm
