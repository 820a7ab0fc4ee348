// Parameter-free cells: activations, Flatten and Dropout.
#include <functional>

#include "zenith/nn.h"

namespace zenith::nn {
namespace {

// One cell type for every stateless x -> f(x) layer.
class FunctionCell : public Cell {
 public:
  FunctionCell(std::string name, std::function<Tensor(const Tensor&)> fn, std::string extra = "")
      : name_(std::move(name)), fn_(std::move(fn)), extra_(std::move(extra)) {}
  Tensor forward(const Tensor& x) override { return fn_(x); }
  std::string type_name() const override { return name_; }
  std::string extra_repr() const override { return extra_; }

 private:
  std::string name_;
  std::function<Tensor(const Tensor&)> fn_;
  std::string extra_;
};

// Zeroes elements with probability p in training (scaling the rest by 1 / (1 - p)); identity in
// eval. PyTorch's convention (MindSpore's old keep_prob = 1 - p).
class DropoutCell : public Cell {
 public:
  explicit DropoutCell(double p) : p_(p) {
    ZENITH_CHECK(p >= 0.0 && p < 1.0, "[Dropout] p must be in [0, 1), got ", p);
  }
  Tensor forward(const Tensor& x) override {
    if (!training() || p_ == 0.0) return x;
    return ops::dropout(x, p_, true);
  }
  std::string type_name() const override { return "Dropout"; }
  std::string extra_repr() const override { return "p=" + std::to_string(p_); }

 private:
  double p_;
};

}  // namespace

std::shared_ptr<Cell> Dropout(double p) { return std::make_shared<DropoutCell>(p); }

std::shared_ptr<Cell> ReLU() {
  return std::make_shared<FunctionCell>("ReLU", [](const Tensor& x) { return ops::relu(x); });
}

std::shared_ptr<Cell> GELU(bool approximate) {
  return std::make_shared<FunctionCell>(
      "GELU", [approximate](const Tensor& x) { return ops::gelu(x, approximate); },
      approximate ? "approximate=true" : "approximate=false");
}

std::shared_ptr<Cell> SiLU() {
  return std::make_shared<FunctionCell>("SiLU", [](const Tensor& x) { return ops::silu(x); });
}

std::shared_ptr<Cell> Sigmoid() {
  return std::make_shared<FunctionCell>("Sigmoid", [](const Tensor& x) { return ops::sigmoid(x); });
}

std::shared_ptr<Cell> Tanh() {
  return std::make_shared<FunctionCell>("Tanh", [](const Tensor& x) { return ops::tanh(x); });
}

std::shared_ptr<Cell> Flatten() {
  return std::make_shared<FunctionCell>("Flatten", [](const Tensor& x) {
    ZENITH_CHECK(x.dim() >= 1, "[Flatten] expected at least a 1-d input, got a scalar");
    return x.dim() == 1 ? x.reshape({x.size(0), 1}) : x.flatten(1);
  });
}

}  // namespace zenith::nn
