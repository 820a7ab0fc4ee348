// ResNet-18 with the CIFAR stem (3x3 conv, stride 1, no max pool) and torchvision's parameter
// names (conv1, bn1, layer1.0.conv1, layer2.0.downsample.0, fc) and initialisation.
#include "zenith/models.h"

namespace zenith::models {
namespace {

nn::CellPtr conv3x3(int64_t in, int64_t out, int64_t stride) {
  return nn::Conv2d(in, out, 3, stride, "pad", 1);
}

// conv-bn-relu-conv-bn + identity (or 1x1 conv-bn when the shape changes), then relu.
class BasicBlock : public nn::Cell {
 public:
  BasicBlock(int64_t in, int64_t out, int64_t stride) {
    conv1_ = register_cell("conv1", conv3x3(in, out, stride));
    bn1_ = register_cell("bn1", nn::BatchNorm2d(out));
    conv2_ = register_cell("conv2", conv3x3(out, out, 1));
    bn2_ = register_cell("bn2", nn::BatchNorm2d(out));
    if (stride != 1 || in != out)
      downsample_ = register_cell(
          "downsample",
          nn::SequentialCell({nn::Conv2d(in, out, 1, stride, "valid"), nn::BatchNorm2d(out)}));
  }
  Tensor forward(const Tensor& x) override {
    Tensor y = ops::relu(bn1_->forward(conv1_->forward(x)));
    y = bn2_->forward(conv2_->forward(y));
    Tensor identity = downsample_ ? downsample_->forward(x) : x;
    return ops::relu(ops::add(y, identity));
  }
  std::string type_name() const override { return "BasicBlock"; }

 private:
  nn::CellPtr conv1_, bn1_, conv2_, bn2_, downsample_;
};

class ResNet : public nn::Cell {
 public:
  ResNet(int64_t in_channels, int64_t num_classes, std::vector<int64_t> blocks) {
    conv1_ = register_cell("conv1", conv3x3(in_channels, 64, 1));
    bn1_ = register_cell("bn1", nn::BatchNorm2d(64));
    int64_t in = 64;
    const int64_t widths[4] = {64, 128, 256, 512};
    for (int i = 0; i < 4; ++i) {
      std::vector<nn::CellPtr> layer;
      for (int64_t b = 0; b < blocks[size_t(i)]; ++b) {
        int64_t stride = (i > 0 && b == 0) ? 2 : 1;
        layer.push_back(std::make_shared<BasicBlock>(in, widths[i], stride));
        in = widths[i];
      }
      layers_[i] = register_cell("layer" + std::to_string(i + 1), nn::SequentialCell(layer));
    }
    avgpool_ = register_cell("avgpool", nn::AdaptiveAvgPool2d(1));
    fc_ = register_cell("fc", nn::Dense(512, num_classes));
    // torchvision: kaiming_normal_(fan_out, relu) for every conv; BN 1/0; fc keeps Linear's.
    for (auto& [name, p] : named_parameters())
      if (p.dim() == 4) nn::init::kaiming_normal_(p);
  }
  Tensor forward(const Tensor& x) override {
    Tensor y = ops::relu(bn1_->forward(conv1_->forward(x)));
    for (auto& layer : layers_) y = layer->forward(y);
    y = avgpool_->forward(y).flatten(1);
    return fc_->forward(y);
  }
  std::string type_name() const override { return "ResNet"; }

 private:
  nn::CellPtr conv1_, bn1_, avgpool_, fc_;
  nn::CellPtr layers_[4];
};

}  // namespace

nn::CellPtr resnet18(int64_t in_channels, int64_t num_classes) {
  ZENITH_CHECK(in_channels > 0 && num_classes > 0,
               "[resnet18] in_channels and num_classes must "
               "be positive, got ",
               in_channels, " and ", num_classes);
  return std::make_shared<ResNet>(in_channels, num_classes, std::vector<int64_t>{2, 2, 2, 2});
}

}  // namespace zenith::models
