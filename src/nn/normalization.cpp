// Normalisation cells: BatchNorm2d, LayerNorm, RMSNorm. Weights start at 1, biases at 0.
#include <sstream>

#include "zenith/autograd.h"
#include "zenith/nn.h"

namespace zenith::nn {
namespace {

class BatchNorm2dCell : public Cell {
 public:
  BatchNorm2dCell(int64_t c, double eps, double momentum, bool affine)
      : c_(c), eps_(eps), momentum_(momentum) {
    ZENITH_CHECK(c > 0, "[BatchNorm2d] num_features must be positive, got ", c);
    ZENITH_CHECK(momentum >= 0.0 && momentum <= 1.0,
                 "[BatchNorm2d] momentum must be in [0, 1], "
                 "got ",
                 momentum);
    if (affine) {
      weight_ = register_parameter("weight", Tensor::ones({c}));
      bias_ = register_parameter("bias", Tensor::zeros({c}));
    }
    running_mean_ = register_buffer("running_mean", Tensor::zeros({c}));
    running_var_ = register_buffer("running_var", Tensor::ones({c}));
    // Kept so PyTorch state dicts load strictly; counts training batches.
    num_batches_ = register_buffer("num_batches_tracked", Tensor::zeros({}, DType::i64));
  }

  Tensor forward(const Tensor& x) override {
    ZENITH_CHECK(x.dim() == 4 && x.size(1) == c_, "[BatchNorm2d] expected input [N, ", c_,
                 ", H, W], got ", shape_str(x.shape()));
    if (training()) {
      NoGradGuard no_grad;
      num_batches_.copy_(ops::add(num_batches_, 1.0));
    }
    // MindSpore: running = momentum * running + (1 - momentum) * batch; the op takes PyTorch's
    // weight of the batch statistic, 1 - momentum.
    return ops::batch_norm(x, weight_, bias_, running_mean_, running_var_, training(),
                           1.0 - momentum_, eps_);
  }
  std::string type_name() const override { return "BatchNorm2d"; }
  std::string extra_repr() const override {
    std::ostringstream os;
    os << "num_features=" << c_ << ", eps=" << eps_ << ", momentum=" << momentum_
       << ", affine=" << (weight_.defined() ? "true" : "false");
    return os.str();
  }

 private:
  int64_t c_;
  double eps_, momentum_;
  Tensor weight_, bias_, running_mean_, running_var_, num_batches_;
};

class LayerNormCell : public Cell {
 public:
  LayerNormCell(const Shape& shape, double eps) : shape_(shape), eps_(eps) {
    ZENITH_CHECK(!shape.empty() && shape_numel(shape) > 0,
                 "[LayerNorm] normalized_shape must be non-empty, got ", shape_str(shape));
    weight_ = register_parameter("weight", Tensor::ones(shape));
    bias_ = register_parameter("bias", Tensor::zeros(shape));
  }
  Tensor forward(const Tensor& x) override {
    return ops::layer_norm(x, shape_, weight_, bias_, eps_);
  }
  std::string type_name() const override { return "LayerNorm"; }
  std::string extra_repr() const override {
    std::ostringstream os;
    os << "normalized_shape=" << shape_str(shape_) << ", eps=" << eps_;
    return os.str();
  }

 private:
  Shape shape_;
  double eps_;
  Tensor weight_, bias_;
};

class RMSNormCell : public Cell {
 public:
  RMSNormCell(int64_t dim, double eps) : dim_(dim), eps_(eps) {
    ZENITH_CHECK(dim > 0, "[RMSNorm] dim must be positive, got ", dim);
    weight_ = register_parameter("weight", Tensor::ones({dim}));
  }
  Tensor forward(const Tensor& x) override { return ops::rms_norm(x, {dim_}, weight_, eps_); }
  std::string type_name() const override { return "RMSNorm"; }
  std::string extra_repr() const override {
    std::ostringstream os;
    os << "dim=" << dim_ << ", eps=" << eps_;
    return os.str();
  }

 private:
  int64_t dim_;
  double eps_;
  Tensor weight_;
};

}  // namespace

std::shared_ptr<Cell> BatchNorm2d(int64_t num_features, double eps, double momentum, bool affine) {
  return std::make_shared<BatchNorm2dCell>(num_features, eps, momentum, affine);
}

std::shared_ptr<Cell> LayerNorm(const Shape& normalized_shape, double eps) {
  return std::make_shared<LayerNormCell>(normalized_shape, eps);
}

std::shared_ptr<Cell> RMSNorm(int64_t dim, double eps) {
  return std::make_shared<RMSNormCell>(dim, eps);
}

}  // namespace zenith::nn
