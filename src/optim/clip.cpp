// Gradient clipping by global L2 norm (torch.nn.utils.clip_grad_norm_).
#include <cmath>

#include "zenith/autograd.h"
#include "zenith/optim.h"

namespace zenith::nn {

// norm = sqrt(sum_p ||g_p||^2); when norm > max_norm, g *= max_norm / (norm + 1e-6).
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  ZENITH_CHECK(max_norm > 0.0, "[clip_grad_norm] max_norm must be positive, got ", max_norm);
  NoGradGuard no_grad;
  double total = 0.0;
  std::vector<Tensor> grads;
  for (auto& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    grads.push_back(g);
    total += ops::sum(ops::mul(g, g)).item();
  }
  double norm = std::sqrt(total);
  double coef = max_norm / (norm + 1e-6);
  if (coef < 1.0)
    for (auto& g : grads) g.copy_(ops::mul(g, coef));
  return norm;
}

Tensor clip_grad_norm_ops(const std::vector<Tensor>& params, double max_norm) {
  ZENITH_CHECK(max_norm > 0.0, "[clip_grad_norm] max_norm must be positive, got ", max_norm);
  NoGradGuard no_grad;
  Tensor total;
  std::vector<Tensor> grads;
  for (auto& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    grads.push_back(g);
    Tensor s = ops::sum(ops::mul(g, g));
    total = total.defined() ? ops::add(total, s) : s;
  }
  if (!total.defined()) return Tensor::scalar(0.0);
  Tensor norm = ops::sqrt(total);
  Tensor coef =
      ops::minimum(ops::div(Tensor::scalar(max_norm), ops::add(norm, 1e-6)), Tensor::scalar(1.0));
  for (auto& g : grads) g.copy_(ops::mul(g, coef));
  return norm;
}

}  // namespace zenith::nn
