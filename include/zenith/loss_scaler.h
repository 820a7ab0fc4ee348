// Dynamic loss scaling for float16 training (PyTorch's GradScaler, MindSpore's
// DynamicLossScaleUpdateCell): the loss is multiplied by scale() before backward so small
// gradients survive float16; the gradients are divided by it before the optimizer step. A step
// whose gradients hold inf or NaN is skipped and the scale halves; after growth_interval clean
// steps in a row it doubles.
//
//   nn::DynamicLossScaler scaler;                  // 2^16, x2 after 2000 clean steps, x0.5
//   scaler.scale_loss(loss).backward();
//   if (scaler.unscale_and_update(params)) opt->step();   // false: overflow, step skipped
//   opt->zero_grad();
#pragma once

#include <cstdint>
#include <vector>

#include "zenith/nn.h"

namespace zenith::nn {

class DynamicLossScaler {
 public:
  explicit DynamicLossScaler(double init_scale = 65536.0, double growth_factor = 2.0,
                             double backoff_factor = 0.5, int64_t growth_interval = 2000,
                             double min_scale = 1.0);
  double scale() const { return scale_; }
  int64_t clean_steps() const { return clean_steps_; }  // since the last overflow or growth

  Tensor scale_loss(const Tensor& loss) const;
  // Divides every defined gradient of `params` by scale(); true when any of them holds inf/NaN.
  bool unscale(const std::vector<Tensor>& params) const;
  // The state machine after a step: an overflow halves the scale (not below min_scale), resets
  // the count and returns false (skip the step); a clean step counts, doubles the scale after
  // growth_interval of them, and returns true.
  bool update(bool found_inf);
  // unscale, then update: whether to take the optimizer step.
  bool unscale_and_update(const std::vector<Tensor>& params) { return update(unscale(params)); }

  StateDict state_dict() const;  // "scale", "clean_steps", for checkpoints
  void load_state_dict(const StateDict& state);

 private:
  double scale_, growth_, backoff_, min_scale_;
  int64_t interval_, clean_steps_ = 0;
};

}  // namespace zenith::nn
