// Learning-rate schedules: functions of the 0-based step about to be taken.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "zenith/optim.h"

namespace zenith::nn {

LRSchedule constant_lr(double lr) {
  ZENITH_CHECK(lr >= 0.0, "[constant_lr] learning rate must be >= 0, got ", lr);
  std::ostringstream os;
  os << "constant(" << lr << ")";
  return {[lr](int64_t) { return lr; }, os.str()};
}

// lr = base * step / warmup during warmup (0 at step 0, as Hugging Face's schedule), then
// min + (base - min) * (1 + cos(pi * progress)) / 2, progress = (step - warmup) / (total -
// warmup) clamped to 1, so lr stays at min_lr after total_steps.
LRSchedule warmup_cosine_lr(double base_lr, int64_t warmup_steps, int64_t total_steps,
                            double min_lr) {
  ZENITH_CHECK(base_lr >= 0.0 && min_lr >= 0.0 && min_lr <= base_lr,
               "[warmup_cosine_lr] expected 0 <= min_lr <= base_lr, got base_lr ", base_lr,
               ", min_lr ", min_lr);
  ZENITH_CHECK(warmup_steps >= 0 && total_steps >= warmup_steps,
               "[warmup_cosine_lr] expected 0 <= warmup_steps <= total_steps, got ", warmup_steps,
               " and ", total_steps);
  std::ostringstream os;
  os << "warmup_cosine(base " << base_lr << ", warmup " << warmup_steps << ", total " << total_steps
     << ", min " << min_lr << ")";
  return {[=](int64_t step) {
            if (step < warmup_steps) return base_lr * double(step) / double(warmup_steps);
            double span = double(std::max<int64_t>(1, total_steps - warmup_steps));
            double progress = std::min(1.0, double(step - warmup_steps) / span);
            return min_lr + (base_lr - min_lr) * 0.5 * (1.0 + std::cos(M_PI * progress));
          },
          os.str()};
}

LRSchedule warmup_stable_decay_lr(double base_lr, int64_t warmup_steps, int64_t decay_start,
                                  int64_t total_steps, double min_lr) {
  ZENITH_CHECK(base_lr >= 0.0 && min_lr >= 0.0 && min_lr <= base_lr,
               "[warmup_stable_decay_lr] expected 0 <= min_lr <= base_lr, got base_lr ", base_lr,
               ", min_lr ", min_lr);
  ZENITH_CHECK(0 <= warmup_steps && warmup_steps <= decay_start && decay_start <= total_steps,
               "[warmup_stable_decay_lr] expected 0 <= warmup_steps <= decay_start <= "
               "total_steps, got ",
               warmup_steps, ", ", decay_start, ", ", total_steps);
  std::ostringstream os;
  os << "warmup_stable_decay(base " << base_lr << ", warmup " << warmup_steps << ", decay from "
     << decay_start << " to " << total_steps << ", min " << min_lr << ")";
  return {[=](int64_t step) {
            if (step < warmup_steps) return base_lr * double(step) / double(warmup_steps);
            if (step < decay_start) return base_lr;
            if (step >= total_steps) return min_lr;
            double progress = double(step - decay_start) / double(total_steps - decay_start);
            return base_lr + (min_lr - base_lr) * progress;
          },
          os.str()};
}

LRSchedule step_lr(double base_lr, int64_t step_size, double gamma) {
  ZENITH_CHECK(base_lr >= 0.0 && step_size > 0 && gamma > 0.0,
               "[step_lr] expected base_lr >= 0,"
               " step_size > 0 and gamma > 0, got ",
               base_lr, ", ", step_size, ", ", gamma);
  std::ostringstream os;
  os << "step(base " << base_lr << ", every " << step_size << " x" << gamma << ")";
  return {[=](int64_t step) { return base_lr * std::pow(gamma, double(step / step_size)); },
          os.str()};
}

LRSchedule piecewise_constant_lr(std::vector<int64_t> milestones, std::vector<double> values) {
  ZENITH_CHECK(values.size() == milestones.size() + 1, "[piecewise_constant_lr] expected ",
               milestones.size() + 1, " values for ", milestones.size(), " milestones, got ",
               values.size());
  for (size_t i = 1; i < milestones.size(); ++i)
    ZENITH_CHECK(milestones[i] > milestones[i - 1],
                 "[piecewise_constant_lr] milestones must "
                 "increase, got ",
                 milestones[i - 1], " then ", milestones[i]);
  std::ostringstream os;
  os << "piecewise(" << values.size() << " pieces)";
  return {[milestones, values](int64_t step) {
            size_t i = size_t(std::upper_bound(milestones.begin(), milestones.end(), step) -
                              milestones.begin());
            return values[i];
          },
          os.str()};
}

}  // namespace zenith::nn
