// Activation checkpointing of one decoder layer: forward without a graph, recompute in backward.
#include "models/llama_layers.h"
#include "zenith/autograd.h"
#include "zenith/random.h"

namespace zenith::models::detail {
namespace {

class GradModeScope {
 public:
  explicit GradModeScope(bool enabled) : previous_(autograd::grad_enabled()) {
    autograd::set_grad_enabled(enabled);
  }
  ~GradModeScope() { autograd::set_grad_enabled(previous_); }
  GradModeScope(const GradModeScope&) = delete;
  GradModeScope& operator=(const GradModeScope&) = delete;

 private:
  bool previous_;
};

}  // namespace

Tensor checkpoint(std::function<Tensor(const Tensor&)> fn, const Tensor& x,
                  const std::vector<Tensor>& params) {
  const bool x_grad = x.requires_grad();
  std::vector<Tensor> trainable;
  for (const Tensor& p : params)
    if (p.requires_grad()) trainable.push_back(p);
  std::vector<Tensor> inputs = trainable;
  if (x_grad) inputs.insert(inputs.begin(), x);
  if (!autograd::needs_grad(inputs)) return fn(x);

  const std::string rng = default_generator().state();
  Tensor y;
  {
    GradModeScope off(false);
    y = fn(x);
  }
  autograd::record("checkpoint", inputs, {y},
                   [fn = std::move(fn), saved = x.detach(), trainable, x_grad,
                    rng](const std::vector<Tensor>& grads) -> std::vector<Tensor> {
                     std::vector<Tensor> wrt = trainable;
                     Tensor input = saved.detach();
                     if (x_grad) {
                       input.requires_grad_(true);
                       wrt.insert(wrt.begin(), input);
                     }
                     if (!grads[0].defined()) return std::vector<Tensor>(wrt.size());
                     Tensor again;
                     {
                       const std::string now = default_generator().state();
                       default_generator().set_state(rng);
                       GradModeScope on(true);
                       again = fn(input);
                       default_generator().set_state(now);
                     }
                     return autograd::grad({again}, wrt, {grads[0]});
                   });
  return y;
}

}  // namespace zenith::models::detail
