// Pooling cells. Stride 0 means "the kernel size" (PyTorch's default).
#include <sstream>

#include "zenith/nn.h"

namespace zenith::nn {
namespace {

class Pool2dCell : public Cell {
 public:
  Pool2dCell(bool max, int64_t k, int64_t stride, int64_t padding)
      : max_(max), k_(k), stride_(stride == 0 ? k : stride), padding_(padding) {
    const char* name = max ? "[MaxPool2d]" : "[AvgPool2d]";
    ZENITH_CHECK(k > 0 && stride >= 0 && padding >= 0, name,
                 " kernel_size must be positive and stride, padding >= 0, got kernel ", k,
                 ", stride ", stride, ", padding ", padding);
    ZENITH_CHECK(2 * padding <= k, name, " padding ", padding,
                 " must be at most half the kernel size ", k);
  }
  Tensor forward(const Tensor& x) override {
    if (max_) return ops::max_pool2d(x, {k_, k_}, {stride_, stride_}, {padding_, padding_});
    return ops::avg_pool2d(x, {k_, k_}, {stride_, stride_}, {padding_, padding_});
  }
  std::string type_name() const override { return max_ ? "MaxPool2d" : "AvgPool2d"; }
  std::string extra_repr() const override {
    std::ostringstream os;
    os << "kernel_size=" << k_ << ", stride=" << stride_;
    if (padding_) os << ", padding=" << padding_;
    return os.str();
  }

 private:
  bool max_;
  int64_t k_, stride_, padding_;
};

class AdaptiveAvgPool2dCell : public Cell {
 public:
  explicit AdaptiveAvgPool2dCell(int64_t size) : size_(size) {
    ZENITH_CHECK(size > 0, "[AdaptiveAvgPool2d] output_size must be positive, got ", size);
  }
  Tensor forward(const Tensor& x) override { return ops::adaptive_avg_pool2d(x, {size_, size_}); }
  std::string type_name() const override { return "AdaptiveAvgPool2d"; }
  std::string extra_repr() const override { return "output_size=" + std::to_string(size_); }

 private:
  int64_t size_;
};

}  // namespace

std::shared_ptr<Cell> MaxPool2d(int64_t kernel_size, int64_t stride, int64_t padding) {
  return std::make_shared<Pool2dCell>(true, kernel_size, stride, padding);
}

std::shared_ptr<Cell> AvgPool2d(int64_t kernel_size, int64_t stride, int64_t padding) {
  return std::make_shared<Pool2dCell>(false, kernel_size, stride, padding);
}

std::shared_ptr<Cell> AdaptiveAvgPool2d(int64_t output_size) {
  return std::make_shared<AdaptiveAvgPool2dCell>(output_size);
}

}  // namespace zenith::nn
