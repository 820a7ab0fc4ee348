// SeedCNN on Fashion-MNIST with the C++ API: the same recipe as `zenith train --model seedcnn
// --dataset fashion-mnist` (Momentum 0.9, lr 0.01, batch 64; the rate falls linearly to 0 over
// the last 30% of the epochs).
// Usage: fashion_mnist [epochs=10] [data_dir=/usr/share/datasets/fashion-mnist]
#include <zenith/zenith.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

using namespace zenith;

int main(int argc, char** argv) {
  int64_t epochs = argc > 1 ? std::atoll(argv[1]) : 10;
  std::string dir = argc > 2 ? argv[2] : "/usr/share/datasets/fashion-mnist";
  try {
    manual_seed(0);
    dataset::config::set_seed(0);
    const auto& info = dataset::dataset_info("fashion-mnist");
    auto prepare = [&](dataset::Dataset ds) {
      return ds.map({vision::Rescale(1.0 / 255.0, 0.0), vision::Normalize(info.mean, info.std),
                     vision::HWC2CHW()},
                    "image", 2);
    };
    auto train = prepare(dataset::FashionMnistDataset(dir, "train").shuffle()).batch(64, true);
    auto test = prepare(dataset::FashionMnistDataset(dir, "test")).batch(256);

    auto net = models::seed_cnn(/*in_channels=*/1, /*image_size=*/28, /*num_classes=*/10);
    auto loss = nn::SoftmaxCrossEntropyWithLogits(/*sparse=*/true);
    const int64_t steps = train.get_dataset_size(), decay = std::max<int64_t>(1, epochs * 3 / 10);
    auto lr = nn::warmup_stable_decay_lr(0.01, 0, (epochs - decay) * steps, epochs * steps);
    auto opt = nn::Momentum(net->trainable_params(), lr, 0.9);
    Model model(net, loss, opt, {{"Accuracy", metrics::Accuracy()}});
    model.fit(epochs, train, test, 1,
              {callbacks::LossMonitor(200), callbacks::TimeMonitor(),
               callbacks::ModelCheckpoint("ckpt_fashion_mnist", {.keep_checkpoint_max = 2})});
    for (const auto& r : model.history())
      std::printf("epoch %lld: loss %.4f, test accuracy %.4f, %.1f s\n", (long long)r.epoch, r.loss,
                  r.eval.at("Accuracy"), r.seconds);
    auto result = model.eval(test);
    std::printf("{\"Accuracy\": %.4f}\n", result.at("Accuracy"));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
