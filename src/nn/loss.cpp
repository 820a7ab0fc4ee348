// Loss cells over ops::cross_entropy and ops::mse_loss.
#include "zenith/nn.h"

namespace zenith::nn {
namespace {

void check_reduction(const std::string& reduction, const char* cell) {
  ZENITH_CHECK(reduction == "mean" || reduction == "sum" || reduction == "none", "[", cell,
               "] reduction must be 'mean', 'sum' or 'none', got '", reduction, "'");
}

class SoftmaxCrossEntropyCell : public LossCell {
 public:
  SoftmaxCrossEntropyCell(bool sparse, std::string reduction, double smoothing, int64_t ignore)
      : sparse_(sparse),
        reduction_(std::move(reduction)),
        smoothing_(smoothing),
        ignore_index_(ignore) {
    check_reduction(reduction_, "SoftmaxCrossEntropyWithLogits");
    ZENITH_CHECK(smoothing >= 0.0 && smoothing <= 1.0,
                 "[SoftmaxCrossEntropyWithLogits] "
                 "label_smoothing must be in [0, 1], got ",
                 smoothing);
  }

  Tensor forward(const Tensor& logits, const Tensor& labels) override {
    Tensor target = labels;
    if (sparse_) {
      ZENITH_CHECK(!is_floating(labels.dtype()),
                   "[SoftmaxCrossEntropyWithLogits] sparse=true "
                   "expects integer class indices, got ",
                   dtype_name(labels.dtype()),
                   " labels (use sparse=false for one-hot or probability labels)");
      if (labels.dtype() != DType::i64) target = labels.to(DType::i64);
    } else {
      ZENITH_CHECK(is_floating(labels.dtype()) && labels.shape() == logits.shape(),
                   "[SoftmaxCrossEntropyWithLogits] sparse=false expects float labels shaped "
                   "like the logits ",
                   shape_str(logits.shape()), ", got ", dtype_name(labels.dtype()), " ",
                   shape_str(labels.shape()), " (use sparse=true for class indices)");
      if (labels.dtype() != logits.dtype()) target = labels.to(logits.dtype());
    }
    return ops::cross_entropy(logits, target, reduction_, ignore_index_, smoothing_);
  }
  std::string type_name() const override { return "SoftmaxCrossEntropyWithLogits"; }

 private:
  bool sparse_;
  std::string reduction_;
  double smoothing_;
  int64_t ignore_index_;
};

class MSELossCell : public LossCell {
 public:
  explicit MSELossCell(std::string reduction) : reduction_(std::move(reduction)) {
    check_reduction(reduction_, "MSELoss");
  }
  Tensor forward(const Tensor& input, const Tensor& target) override {
    return ops::mse_loss(input, target, reduction_);
  }
  std::string type_name() const override { return "MSELoss"; }

 private:
  std::string reduction_;
};

}  // namespace

LossPtr SoftmaxCrossEntropyWithLogits(bool sparse, const std::string& reduction,
                                      double label_smoothing, int64_t ignore_index) {
  return std::make_shared<SoftmaxCrossEntropyCell>(sparse, reduction, label_smoothing,
                                                   ignore_index);
}

LossPtr MSELoss(const std::string& reduction) { return std::make_shared<MSELossCell>(reduction); }

}  // namespace zenith::nn
