// Adam (L2 weight decay added to the gradient) and AdamW (decoupled decay), one fused
// `adam_update` op per parameter.
#include "zenith/ops.h"
#include "zenith/optim.h"

namespace zenith::nn {
namespace {

class AdamOptimizer : public Optimizer {
 public:
  AdamOptimizer(bool decoupled, std::vector<Tensor> params, LRSchedule lr, double beta1,
                double beta2, double eps, double weight_decay)
      : Optimizer(std::move(params), std::move(lr), weight_decay),
        decoupled_(decoupled),
        beta1_(beta1),
        beta2_(beta2),
        eps_(eps) {
    const char* name = decoupled ? "[AdamW]" : "[Adam]";
    ZENITH_CHECK(beta1 >= 0.0 && beta1 < 1.0 && beta2 >= 0.0 && beta2 < 1.0, name,
                 " betas must be in [0, 1), got ", beta1, " and ", beta2);
    ZENITH_CHECK(eps >= 0.0, name, " eps must be >= 0, got ", eps);
    add_slot("moment1");
    add_slot("moment2");
  }
  std::string type_name() const override { return decoupled_ ? "AdamW" : "Adam"; }

 protected:
  void update(size_t index, Tensor& param, const Tensor& grad, double lr) override {
    ops::adam_update(param, grad, slots_["moment1"][index], slots_["moment2"][index], lr, beta1_,
                     beta2_, eps_, weight_decay_, decoupled_, step_ + 1);
  }

 private:
  bool decoupled_;
  double beta1_, beta2_, eps_;
};

}  // namespace

OptimizerPtr Adam(std::vector<Tensor> params, LRSchedule learning_rate, double beta1, double beta2,
                  double eps, double weight_decay) {
  return std::make_shared<AdamOptimizer>(false, std::move(params), std::move(learning_rate), beta1,
                                         beta2, eps, weight_decay);
}

OptimizerPtr Adam(std::vector<Tensor> params, double learning_rate, double beta1, double beta2,
                  double eps, double weight_decay) {
  return Adam(std::move(params), constant_lr(learning_rate), beta1, beta2, eps, weight_decay);
}

OptimizerPtr AdamW(std::vector<Tensor> params, LRSchedule learning_rate, double beta1, double beta2,
                   double eps, double weight_decay) {
  return std::make_shared<AdamOptimizer>(true, std::move(params), std::move(learning_rate), beta1,
                                         beta2, eps, weight_decay);
}

OptimizerPtr AdamW(std::vector<Tensor> params, double learning_rate, double beta1, double beta2,
                   double eps, double weight_decay) {
  return AdamW(std::move(params), constant_lr(learning_rate), beta1, beta2, eps, weight_decay);
}

}  // namespace zenith::nn
