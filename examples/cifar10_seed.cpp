// The seed's CIFAR-10 program, line for line in C++ (with the two pooling layers the seed's
// network omits restored: without them Dense(64 * 6 * 6, 10) does not fit a 32x32 input).
// Usage: cifar10_seed [cifar-10-batches-bin directory, default ./cifar-10-batches-bin]
// Like the seed, it trains and evaluates on the whole dataset (train and test batches).
#include <zenith/zenith.h>

#include <cstdio>
#include <string>

using namespace zenith;

int main(int argc, char** argv) {
  std::string data_dir = argc > 1 ? argv[1] : "./cifar-10-batches-bin";
  try {
    context::set_context({.mode = context::PYNATIVE_MODE, .device_target = "CPU"});
    auto ds = dataset::Cifar10Dataset(data_dir)
                  .map({vision::Rescale(1.0 / 255.0, 0.0), vision::HWC2CHW()}, "image")
                  .batch(32);
    auto net = nn::SequentialCell({nn::Conv2d(3, 32, 3, 1, "valid"), nn::ReLU(), nn::MaxPool2d(2),
                                   nn::Conv2d(32, 64, 3, 1, "valid"), nn::ReLU(), nn::MaxPool2d(2),
                                   nn::Flatten(), nn::Dense(64 * 6 * 6, 10)});
    auto loss = nn::SoftmaxCrossEntropyWithLogits(/*sparse=*/true);
    auto opt = nn::Momentum(net->trainable_params(), 0.01, 0.9);
    Model model(net, loss, opt, {{"Accuracy", metrics::Accuracy()}});
    model.train(10, ds, {callbacks::LossMonitor(), callbacks::ModelCheckpoint("ckpt")});
    auto result = model.eval(ds);
    std::printf("{'Accuracy': %.3f}\n", result.at("Accuracy"));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
