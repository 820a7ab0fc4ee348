// DynamicLossScaler: the loss scale's state machine (overflow -> skip and back off; growth after
// a window of clean steps).
#include "zenith/loss_scaler.h"

#include <cmath>

#include "zenith/autograd.h"
#include "zenith/ops.h"

namespace zenith::nn {

DynamicLossScaler::DynamicLossScaler(double init_scale, double growth_factor, double backoff_factor,
                                     int64_t growth_interval, double min_scale)
    : scale_(init_scale),
      growth_(growth_factor),
      backoff_(backoff_factor),
      min_scale_(min_scale),
      interval_(growth_interval) {
  ZENITH_CHECK(init_scale > 0 && growth_factor > 1 && backoff_factor > 0 && backoff_factor < 1 &&
                   growth_interval > 0 && min_scale > 0,
               "[loss_scaler] need init_scale > 0, growth_factor > 1, 0 < backoff_factor < 1, "
               "growth_interval > 0, min_scale > 0");
}

Tensor DynamicLossScaler::scale_loss(const Tensor& loss) const { return ops::mul(loss, scale_); }

bool DynamicLossScaler::unscale(const std::vector<Tensor>& params) const {
  NoGradGuard no_grad;
  bool found_inf = false;
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    g.copy_(ops::mul(g, 1.0 / scale_));
    if (!found_inf && !std::isfinite(ops::sum(g.to(DType::f64)).item())) found_inf = true;
  }
  return found_inf;
}

bool DynamicLossScaler::update(bool found_inf) {
  if (found_inf) {
    scale_ = std::max(min_scale_, scale_ * backoff_);
    clean_steps_ = 0;
    return false;
  }
  if (++clean_steps_ >= interval_) {
    scale_ *= growth_;
    clean_steps_ = 0;
  }
  return true;
}

StateDict DynamicLossScaler::state_dict() const {
  return {{"scale", Tensor::scalar(scale_, DType::f64)},
          {"clean_steps", Tensor::scalar(double(clean_steps_), DType::i64)}};
}

void DynamicLossScaler::load_state_dict(const StateDict& state) {
  ZENITH_CHECK(state.count("scale") && state.count("clean_steps"),
               "[loss_scaler] state needs 'scale' and 'clean_steps'");
  scale_ = state.at("scale").item();
  clean_steps_ = int64_t(state.at("clean_steps").item());
}

}  // namespace zenith::nn
