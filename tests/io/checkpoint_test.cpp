// Checkpoints: model + optimizer state + metadata round trip; a different architecture is
// refused with every mismatch listed and the model left untouched.
#include <gtest/gtest.h>

#include "support/op_check.h"
#include "support/temp_dir.h"
#include "zenith/io.h"
#include "zenith/optim.h"

using zenith::Tensor;
using zenith::testing::throws_with;

namespace {

// A cell with two parameters and a buffer, independent of the layer library.
class Toy : public zenith::nn::Cell {
 public:
  Toy(int64_t in, int64_t out) {
    register_parameter("weight", Tensor::randn({out, in}));
    register_parameter("bias", Tensor::zeros({out}));
    register_buffer("count", Tensor::zeros({1}, zenith::DType::i64));
  }
  Tensor forward(const Tensor& x) override { return x; }
  std::string type_name() const override { return "Toy"; }
};

TEST(Checkpoint, RoundTripsModelOptimizerAndMetadata) {
  zenith::manual_seed(1);
  auto net = std::make_shared<Toy>(3, 2);
  auto opt = zenith::nn::Momentum(net->trainable_params(), 0.1, 0.9);
  zenith::testing::TempDir dir("checkpoint");
  const std::string path = dir / "ckpt.safetensors";
  zenith::io::save_checkpoint(path, *net, opt.get(), {{"epoch", "4"}, {"architecture", "toy"}});

  zenith::manual_seed(2);
  auto other = std::make_shared<Toy>(3, 2);
  auto other_opt = zenith::nn::Momentum(other->trainable_params(), 0.1, 0.9);
  auto meta = zenith::io::load_checkpoint(path, *other, other_opt.get());
  EXPECT_EQ(meta.at("epoch"), "4");
  EXPECT_EQ(meta.at("format"), "zenith-checkpoint");
  EXPECT_TRUE(zenith::testing::all_close(other->state_dict().at("weight"),
                                         net->state_dict().at("weight"), 0, 0));
  auto raw = zenith::io::load_safetensors(path);
  EXPECT_TRUE(raw.count("optimizer.step"));
  EXPECT_TRUE(raw.count("count"));
}

TEST(Checkpoint, DifferentArchitectureListsMismatchesAndChangesNothing) {
  auto net = std::make_shared<Toy>(3, 2);
  zenith::testing::TempDir dir("checkpoint");
  const std::string path = dir / "arch.safetensors";
  zenith::io::save_checkpoint(path, *net, nullptr, {{"architecture", "toy-3-2"}});
  auto wider = std::make_shared<Toy>(4, 2);
  Tensor before = wider->state_dict().at("weight").clone();
  EXPECT_TRUE(throws_with([&] { zenith::io::load_checkpoint(path, *wider); },
                          "does not fit the model (the checkpoint is a 'toy-3-2')"));
  EXPECT_TRUE(throws_with([&] { zenith::io::load_checkpoint(path, *wider); },
                          "weight: checkpoint [2, 3], model [2, 4]"));
  EXPECT_TRUE(zenith::testing::all_close(wider->state_dict().at("weight"), before, 0, 0));
  // Optimizer state asked for but absent.
  auto same = std::make_shared<Toy>(3, 2);
  auto opt = zenith::nn::Momentum(same->trainable_params(), 0.1, 0.9);
  EXPECT_TRUE(throws_with([&] { zenith::io::load_checkpoint(path, *same, opt.get()); },
                          "holds no optimizer state"));
}

}  // namespace
