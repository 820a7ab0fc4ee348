// Optimizer base: the step loop, gradient clearing, slots and checkpoint state.
#include <set>
#include <sstream>

#include "nn/state_match.h"
#include "zenith/autograd.h"
#include "zenith/optim.h"

namespace zenith::nn {

Optimizer::Optimizer(std::vector<Tensor> params, LRSchedule lr, double weight_decay)
    : params_(std::move(params)), lr_(std::move(lr)), weight_decay_(weight_decay) {
  ZENITH_CHECK(lr_.fn != nullptr, "[Optimizer] learning-rate schedule is empty");
  ZENITH_CHECK(weight_decay >= 0.0, "[Optimizer] weight_decay must be >= 0, got ", weight_decay);
  std::set<const TensorImpl*> seen;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    ZENITH_CHECK(p.defined(), "[Optimizer] parameter ", i, " is undefined");
    ZENITH_CHECK(is_floating(p.dtype()), "[Optimizer] parameter ", i, " has dtype ",
                 dtype_name(p.dtype()), "; only floating tensors can be optimized");
    ZENITH_CHECK(p.is_leaf(), "[Optimizer] parameter ", i, " is not a leaf tensor");
    ZENITH_CHECK(p.is_contiguous(), "[Optimizer] parameter ", i, " ", shape_str(p.shape()),
                 " is not contiguous; updates are in place on its storage");
    ZENITH_CHECK(seen.insert(&p.impl()).second, "[Optimizer] parameter ", i,
                 " appears twice in the parameter list");
  }
}

std::vector<Tensor>& Optimizer::add_slot(const std::string& name) {
  std::vector<Tensor> slot;
  slot.reserve(params_.size());
  for (auto& p : params_) slot.push_back(Tensor::zeros(p.shape(), p.dtype(), p.device()));
  return slots_[name] = std::move(slot);
}

void Optimizer::step() {
  NoGradGuard no_grad;
  double lr = lr_(step_);
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor g = params_[i].grad();
    if (!g.defined()) continue;
    ZENITH_CHECK(g.shape() == params_[i].shape(), "[", type_name(), "] gradient ",
                 shape_str(g.shape()), " does not match parameter ", i, " ",
                 shape_str(params_[i].shape()));
    if (g.dtype() != params_[i].dtype()) g = g.to(params_[i].dtype());
    g = g.contiguous();
    update(i, params_[i], g, lr);
  }
  ++step_;
}

void Optimizer::zero_grad() {
  for (auto& p : params_) p.zero_grad();
}

StateDict Optimizer::state_dict() const {
  StateDict out;
  for (auto& [name, tensors] : slots_)
    for (size_t i = 0; i < tensors.size(); ++i)
      out.emplace(name + "." + std::to_string(i), tensors[i].detach());
  out.emplace("step", Tensor::scalar(double(step_), DType::i64));
  return out;
}

void Optimizer::load_state_dict(const StateDict& state) {
  detail::StateMatch match(state, "optimizer");
  match.expect("step", {});
  for (auto& [name, tensors] : slots_)
    for (size_t i = 0; i < tensors.size(); ++i)
      match.expect(name + "." + std::to_string(i), tensors[i].shape());
  match.check("[load_state_dict] " + type_name() + ": optimizer state does not match",
              /*strict=*/true);
  NoGradGuard no_grad;
  for (auto& [name, tensors] : slots_)
    for (size_t i = 0; i < tensors.size(); ++i)
      tensors[i].copy_(state.at(name + "." + std::to_string(i)));
  step_ = int64_t(state.at("step").item());
}

}  // namespace zenith::nn
