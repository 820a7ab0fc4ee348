// The model zoo: output shapes, parameter counts and names.
#include "support/op_check.h"

using namespace zenith;
using namespace zenith::testing;

namespace {
bool has_name(const nn::CellPtr& net, const std::string& name) {
  return net->state_dict().count(name) > 0;
}
}  // namespace

TEST(Zoo, SeedCnnBothVariants) {
  NoGradGuard g;
  auto cifar = models::seed_cnn(3, 32, 10);
  EXPECT_EQ(cifar->forward(Tensor::zeros({2, 3, 32, 32})).shape(), (Shape{2, 10}));
  // conv 3*32*9 + conv 32*64*9 + dense 64*6*6*10 + 10 (MindSpore convs: no bias).
  EXPECT_EQ(cifar->num_parameters(), 864 + 18432 + 23040 + 10);
  EXPECT_EQ(cifar->state_dict().at("7.weight").shape(), (Shape{10, 2304}));
  auto fmnist = models::seed_cnn(1, 28, 10);
  EXPECT_EQ(fmnist->forward(Tensor::zeros({3, 1, 28, 28})).shape(), (Shape{3, 10}));
  EXPECT_EQ(fmnist->num_parameters(), 288 + 18432 + 16000 + 10);
  EXPECT_EQ(fmnist->state_dict().size(), 4u);  // 0.weight 3.weight 7.weight 7.bias
}

TEST(Zoo, LeNet) {
  NoGradGuard g;
  auto l28 = models::lenet5(1, 28, 10);
  EXPECT_EQ(l28->forward(Tensor::zeros({2, 1, 28, 28})).shape(), (Shape{2, 10}));
  auto l32 = models::lenet5(3, 32, 10);
  EXPECT_EQ(l32->forward(Tensor::zeros({2, 3, 32, 32})).shape(), (Shape{2, 10}));
  EXPECT_TRUE(has_name(l28, "conv1.weight"));
  EXPECT_TRUE(has_name(l28, "fc3.bias"));
  // 150 + 2400 + (400*120+120) + (120*84+84) + (84*10+10)
  EXPECT_EQ(l28->num_parameters(), 150 + 2400 + 48120 + 10164 + 850);
  EXPECT_TRUE(throws_with([] { models::lenet5(1, 64, 10); }, "[lenet5] image_size"));
}

TEST(Zoo, ResNet18Cifar) {
  auto net = models::resnet18(3, 10);
  EXPECT_EQ(net->num_parameters(), 11173962);
  for (const char* name :
       {"conv1.weight", "bn1.weight", "bn1.running_mean", "layer1.0.conv1.weight",
        "layer1.1.bn2.bias", "layer2.0.downsample.0.weight", "layer2.0.downsample.1.running_var",
        "layer4.1.conv2.weight", "fc.weight", "fc.bias"})
    EXPECT_TRUE(has_name(net, name)) << name;
  EXPECT_FALSE(has_name(net, "layer1.0.downsample.0.weight"));
  EXPECT_EQ(net->state_dict().at("conv1.weight").shape(), (Shape{64, 3, 3, 3}));
  EXPECT_EQ(net->state_dict().at("layer3.0.downsample.0.weight").shape(), (Shape{256, 128, 1, 1}));
  EXPECT_EQ(net->state_dict().at("fc.weight").shape(), (Shape{10, 512}));
  // 62 parameter tensors (20 convs + 20 BNs x 2 + fc x 2) as in torchvision with this stem.
  EXPECT_EQ(net->named_parameters().size(), 62u);
  net->eval();
  NoGradGuard g;
  EXPECT_EQ(net->forward(Tensor::zeros({2, 3, 32, 32})).shape(), (Shape{2, 10}));
}

TEST(Zoo, CreateByName) {
  EXPECT_EQ(models::names(), (std::vector<std::string>{"seedcnn", "lenet", "resnet18"}));
  EXPECT_EQ(models::create("seedcnn", 1, 28, 10)->num_parameters(), 34730);
  EXPECT_EQ(models::create("resnet18", 3, 32, 100)->state_dict().at("fc.bias").shape(),
            (Shape{100}));
  EXPECT_TRUE(
      throws_with([] { models::create("vgg16", 3, 32, 10); },
                  "[models] unknown model 'vgg16'; known models: seedcnn, lenet, resnet18"));
}
