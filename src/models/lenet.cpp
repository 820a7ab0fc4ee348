// LeNet-5 as in MindSpore's model zoo (ReLU, max pooling, convs without bias), with named
// children conv1, conv2, fc1, fc2, fc3.
#include "zenith/models.h"

namespace zenith::models {
namespace {

class LeNet5 : public nn::Cell {
 public:
  LeNet5(int64_t in_channels, int64_t image_size, int64_t num_classes) {
    // Pads a 28x28 input to LeNet's 32x32 (padding 2) so both sizes reach 16x5x5.
    int64_t pad = (32 - image_size) / 2;
    conv1_ = register_cell("conv1", nn::Conv2d(in_channels, 6, 5, 1, pad ? "pad" : "valid", pad));
    conv2_ = register_cell("conv2", nn::Conv2d(6, 16, 5, 1, "valid"));
    fc1_ = register_cell("fc1", nn::Dense(16 * 5 * 5, 120));
    fc2_ = register_cell("fc2", nn::Dense(120, 84));
    fc3_ = register_cell("fc3", nn::Dense(84, num_classes));
  }
  Tensor forward(const Tensor& x) override {
    Tensor y = ops::max_pool2d(ops::relu(conv1_->forward(x)), {2, 2}, {2, 2});
    y = ops::max_pool2d(ops::relu(conv2_->forward(y)), {2, 2}, {2, 2});
    y = y.flatten(1);
    y = ops::relu(fc1_->forward(y));
    y = ops::relu(fc2_->forward(y));
    return fc3_->forward(y);
  }
  std::string type_name() const override { return "LeNet5"; }

 private:
  nn::CellPtr conv1_, conv2_, fc1_, fc2_, fc3_;
};

}  // namespace

nn::CellPtr lenet5(int64_t in_channels, int64_t image_size, int64_t num_classes) {
  ZENITH_CHECK(image_size == 28 || image_size == 32, "[lenet5] image_size must be 28 or 32, got ",
               image_size);
  ZENITH_CHECK(in_channels > 0 && num_classes > 0,
               "[lenet5] in_channels and num_classes must "
               "be positive, got ",
               in_channels, " and ", num_classes);
  return std::make_shared<LeNet5>(in_channels, image_size, num_classes);
}

}  // namespace zenith::models
