// Optimizers (in zenith::nn as in MindSpore), learning-rate schedules, gradient clipping.
//   auto opt = nn::Momentum(net->trainable_params(), 0.01, 0.9);
//   loss.backward(); opt->step(); opt->zero_grad();
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "zenith/nn.h"

namespace zenith::nn {

// Learning rate as a function of the step count (0-based, before the step is taken).
struct LRSchedule {
  std::function<double(int64_t step)> fn;
  std::string description;
  double operator()(int64_t step) const { return fn(step); }
};
LRSchedule constant_lr(double lr);
// Linear warmup from 0 to base_lr over warmup_steps, then cosine decay to min_lr at total_steps.
LRSchedule warmup_cosine_lr(double base_lr, int64_t warmup_steps, int64_t total_steps,
                            double min_lr = 0.0);
// Warmup-stable-decay (trapezoidal): linear warmup from 0 over warmup_steps, base_lr until
// decay_start, then linear decay to min_lr at total_steps (min_lr afterwards).
LRSchedule warmup_stable_decay_lr(double base_lr, int64_t warmup_steps, int64_t decay_start,
                                  int64_t total_steps, double min_lr = 0.0);
// base_lr * gamma^(step / step_size)
LRSchedule step_lr(double base_lr, int64_t step_size, double gamma);
// values[i] while step < milestones[i]; values.back() afterwards (values = milestones + 1).
LRSchedule piecewise_constant_lr(std::vector<int64_t> milestones, std::vector<double> values);

class Optimizer {
 public:
  Optimizer(std::vector<Tensor> params, LRSchedule lr, double weight_decay);
  virtual ~Optimizer() = default;
  // Applies one update from the parameters' .grad (parameters without a grad are skipped).
  void step();
  // Graph mode replayed this step's update (the graph's update nodes ran): counts the step as
  // step() does, so the schedule and Adam's bias correction go on.
  void count_replayed_step() { ++step_; }
  void zero_grad();
  double current_lr() const { return lr_(step_); }
  int64_t step_count() const { return step_; }
  const std::vector<Tensor>& params() const { return params_; }
  void set_lr(LRSchedule lr) { lr_ = std::move(lr); }
  // Per-parameter state ("moments.3", "step") for checkpoints; names index params().
  virtual StateDict state_dict() const;
  virtual void load_state_dict(const StateDict& state);
  virtual std::string type_name() const = 0;

 protected:
  // One parameter's fused update (weight decay, slots, parameter) from its gradient, which the
  // base passes plain, contiguous and in the parameter's dtype.
  virtual void update(size_t index, Tensor& param, const Tensor& grad, double lr) = 0;
  // Creates slot `name`: one zero tensor shaped like each parameter.
  std::vector<Tensor>& add_slot(const std::string& name);
  std::vector<Tensor> params_;
  LRSchedule lr_;
  double weight_decay_;
  int64_t step_ = 0;
  // Optimizer slots, one vector per slot name, each with one tensor per parameter.
  std::map<std::string, std::vector<Tensor>> slots_;
};
using OptimizerPtr = std::shared_ptr<Optimizer>;

// MindSpore Momentum / PyTorch SGD with momentum: v = momentum * v + (g + wd * p);
// p -= lr * v (Nesterov: p -= lr * (g + momentum * v)).
OptimizerPtr Momentum(std::vector<Tensor> params, double learning_rate, double momentum,
                      double weight_decay = 0.0, bool use_nesterov = false);
OptimizerPtr Momentum(std::vector<Tensor> params, LRSchedule learning_rate, double momentum,
                      double weight_decay = 0.0, bool use_nesterov = false);
OptimizerPtr SGD(std::vector<Tensor> params, double learning_rate, double momentum = 0.0,
                 double weight_decay = 0.0, bool nesterov = false);
OptimizerPtr Adam(std::vector<Tensor> params, double learning_rate = 1e-3, double beta1 = 0.9,
                  double beta2 = 0.999, double eps = 1e-8, double weight_decay = 0.0);
OptimizerPtr Adam(std::vector<Tensor> params, LRSchedule learning_rate, double beta1 = 0.9,
                  double beta2 = 0.999, double eps = 1e-8, double weight_decay = 0.0);
OptimizerPtr AdamW(std::vector<Tensor> params, double learning_rate = 1e-3, double beta1 = 0.9,
                   double beta2 = 0.999, double eps = 1e-8, double weight_decay = 1e-2);
OptimizerPtr AdamW(std::vector<Tensor> params, LRSchedule learning_rate, double beta1 = 0.9,
                   double beta2 = 0.999, double eps = 1e-8, double weight_decay = 1e-2);

// Scales all gradients so their global L2 norm is at most max_norm; returns the norm before.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);
// The same with ops only, no host read (graph mode captures it): the norm before as a 0-d
// tensor; every gradient is scaled by min(1, max_norm / (norm + 1e-6)). The norm is summed in
// float32 (clip_grad_norm sums in double), so the two agree to rounding.
Tensor clip_grad_norm_ops(const std::vector<Tensor>& params, double max_norm);

}  // namespace zenith::nn
