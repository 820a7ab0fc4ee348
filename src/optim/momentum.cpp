// Momentum (MindSpore) / SGD (PyTorch), one fused `momentum_update` op per parameter.
#include "zenith/ops.h"
#include "zenith/optim.h"

namespace zenith::nn {
namespace {

class MomentumOptimizer : public Optimizer {
 public:
  MomentumOptimizer(std::string name, std::vector<Tensor> params, LRSchedule lr, double momentum,
                    double weight_decay, bool nesterov)
      : Optimizer(std::move(params), std::move(lr), weight_decay),
        name_(std::move(name)),
        momentum_(momentum),
        nesterov_(nesterov) {
    ZENITH_CHECK(momentum >= 0.0, "[", name_, "] momentum must be >= 0, got ", momentum);
    ZENITH_CHECK(!nesterov || momentum > 0.0, "[", name_, "] Nesterov needs momentum > 0");
    // Plain SGD keeps no velocity.
    if (momentum > 0.0) velocity_ = &add_slot("moments");
  }
  std::string type_name() const override { return name_; }

 protected:
  void update(size_t index, Tensor& param, const Tensor& grad, double lr) override {
    ops::momentum_update(param, grad, velocity_ ? (*velocity_)[index] : Tensor(), lr, momentum_,
                         weight_decay_, nesterov_);
  }

 private:
  std::string name_;
  double momentum_;
  bool nesterov_;
  std::vector<Tensor>* velocity_ = nullptr;  // into slots_ (std::map nodes are stable)
};

}  // namespace

OptimizerPtr Momentum(std::vector<Tensor> params, LRSchedule learning_rate, double momentum,
                      double weight_decay, bool use_nesterov) {
  return std::make_shared<MomentumOptimizer>("Momentum", std::move(params),
                                             std::move(learning_rate), momentum, weight_decay,
                                             use_nesterov);
}

OptimizerPtr Momentum(std::vector<Tensor> params, double learning_rate, double momentum,
                      double weight_decay, bool use_nesterov) {
  return Momentum(std::move(params), constant_lr(learning_rate), momentum, weight_decay,
                  use_nesterov);
}

OptimizerPtr SGD(std::vector<Tensor> params, double learning_rate, double momentum,
                 double weight_decay, bool nesterov) {
  return std::make_shared<MomentumOptimizer>("SGD", std::move(params), constant_lr(learning_rate),
                                             momentum, weight_decay, nesterov);
}

}  // namespace zenith::nn
