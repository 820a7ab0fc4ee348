// The model zoo.
#pragma once

#include <string>
#include <vector>

#include "zenith/nn.h"

namespace zenith::models {

// The seed's CIFAR-10 network with its two missing pooling layers restored:
// Conv(c,32,3,valid) ReLU MaxPool(2) Conv(32,64,3,valid) ReLU MaxPool(2) Flatten Dense(64*s*s, n).
// image_size 32 -> s = 6 (3x32x32); image_size 28 -> s = 5 (1x28x28 variant).
nn::CellPtr seed_cnn(int64_t in_channels = 3, int64_t image_size = 32, int64_t num_classes = 10);
// LeNet-5 (conv 6@5x5 pad 2, pool, conv 16@5x5, pool, 120, 84, n) for 28x28 or 32x32 inputs.
nn::CellPtr lenet5(int64_t in_channels = 1, int64_t image_size = 28, int64_t num_classes = 10);
// ResNet-18 with the CIFAR stem (3x3 conv, stride 1, no max pool); torchvision parameter names.
nn::CellPtr resnet18(int64_t in_channels = 3, int64_t num_classes = 10);

// By name: "seedcnn", "lenet", "resnet18"; unknown names list the known ones.
nn::CellPtr create(const std::string& name, int64_t in_channels, int64_t image_size,
                   int64_t num_classes);
std::vector<std::string> names();

}  // namespace zenith::models
