// nn::LoraLinear: y = x W^T + b + B(A(dropout(x))) scaling, PEFT's initialisation and names,
// merging in the base's dtype.
#include "zenith/lora.h"

#include <gtest/gtest.h>

#include <cmath>

#include "support/op_check.h"
#include "support/tensor_bits.h"

namespace zenith::testing {
namespace {

std::vector<std::string> names(const nn::Cell& cell) {
  std::vector<std::string> out;
  for (const auto& [name, _] : cell.named_parameters()) out.push_back(name);
  return out;
}

TEST(LoraLinear, ComputesTheBasePlusTheScaledLowRankUpdate) {
  manual_seed(1);
  auto layer = nn::LoraLinear::create(6, 5, true);
  Tensor A = Tensor::randn({3, 6}), B = Tensor::randn({5, 3}), x = Tensor::randn({2, 4, 6});
  layer->set_adapter({.r = 3, .lora_alpha = 6, .lora_dropout = 0, .use_rslora = false}, A, B);
  EXPECT_EQ(names(*layer),
            (std::vector<std::string>{"weight", "bias", "lora_A.weight", "lora_B.weight"}));
  Tensor expected = ops::add(ops::linear(x, layer->weight(), layer->bias()),
                             ops::mul(ops::matmul(ops::matmul(x, A.t()), B.t()), 2.0));
  EXPECT_TRUE(all_close(layer->forward(x), expected, 1e-5, 1e-5));
  // rsLoRA: alpha / sqrt(r)
  EXPECT_DOUBLE_EQ(
      (nn::LoraSpec{.r = 4, .lora_alpha = 8, .lora_dropout = 0, .use_rslora = true}.scaling()),
      4.0);
}

TEST(LoraLinear, FreshAdapterChangesNothingAndTrainsOnlyItsWeights) {
  manual_seed(2);
  auto layer = nn::LoraLinear::create(8, 3, false);
  Tensor x = Tensor::randn({4, 8});
  Tensor before = layer->forward(x).detach();
  layer->add_adapter({.r = 2, .lora_alpha = 4, .lora_dropout = 0, .use_rslora = false});
  EXPECT_TRUE(same_bits(layer->forward(x).detach(), before));
  Tensor w = layer->weight();  // a frozen base
  w.requires_grad_(false);
  ops::sum(layer->forward(x)).backward();
  EXPECT_FALSE(layer->weight().grad().defined());
  EXPECT_TRUE(layer->lora_B().grad().defined());  // B gets a gradient at zero
  EXPECT_TRUE(layer->lora_A().grad().defined());
  EXPECT_EQ(ops::max(ops::abs(layer->lora_A().grad())).item(), 0.0);  // but A none while B = 0
}

TEST(LoraLinear, DropoutOnlyWhileTraining) {
  manual_seed(3);
  auto layer = nn::LoraLinear::create(16, 4, false);
  layer->set_adapter({.r = 2, .lora_alpha = 2, .lora_dropout = 0.5, .use_rslora = false},
                     Tensor::randn({2, 16}), Tensor::randn({4, 2}));
  Tensor x = Tensor::randn({3, 16});
  NoGradGuard no_grad;
  layer->eval();
  Tensor a = layer->forward(x), b = layer->forward(x);
  EXPECT_TRUE(same_bits(a, b));
  layer->train();
  EXPECT_FALSE(same_bits(layer->forward(x), a));
}

TEST(LoraLinear, MergeRoundsOnceIntoTheBaseDtype) {
  manual_seed(4);
  auto layer = nn::LoraLinear::create(8, 6, true, DType::bf16);
  Tensor A = Tensor::randn({2, 8}), B = Tensor::randn({6, 2}), x = Tensor::randn({5, 8});
  layer->set_adapter({.r = 2, .lora_alpha = 3, .lora_dropout = 0, .use_rslora = false}, A, B);
  Tensor handle = layer->weight();  // an optimizer's handle must see the merge
  Tensor exact = ops::add(layer->weight().to(DType::f32), layer->delta_weight());
  NoGradGuard no_grad;
  Tensor unmerged = layer->forward(x);
  layer->merge();
  EXPECT_FALSE(layer->has_adapter());
  EXPECT_EQ(names(*layer), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(layer->weight().dtype(), DType::bf16);
  EXPECT_TRUE(same_bits(handle, exact.to(DType::bf16)));
  EXPECT_TRUE(all_close(layer->forward(x), unmerged, 2e-2, 2e-2));
  EXPECT_TRUE(throws_with([&] { layer->merge(); }, "the layer has no adapter"));
}

// amp with bfloat16 on a frozen bfloat16 base: x and the output gradient are rounded to bfloat16
// as they enter the products, the result and dx are their float32 sums (bfloat16 arithmetic
// where the CPU has it), not rounded again: equal to the float64 products of the rounded values
// within float32 accumulation, far inside one bfloat16 step.
TEST(LoraLinear, Bf16ComputeKeepsTheFloat32Sums) {
  manual_seed(5);
  auto layer = nn::LoraLinear::create(96, 40, false, DType::bf16);
  Tensor w = layer->weight();
  w.requires_grad_(false);
  layer->set_compute_dtype(DType::bf16);
  Tensor x = Tensor::randn({2, 32, 96}).requires_grad_(), dy = Tensor::randn({2, 32, 40});
  Tensor y = layer->forward(x);
  EXPECT_EQ(y.dtype(), DType::f32);
  y.backward(dy);
  const Tensor w64 = w.to(DType::f64);
  const Tensor y64 = ops::linear(x.detach().to(DType::bf16).to(DType::f64), w64);
  const Tensor dx64 = ops::matmul(dy.to(DType::bf16).to(DType::f64), w64);
  EXPECT_TRUE(all_close(y.to(DType::f64), y64, 1e-5, 1e-5));
  EXPECT_TRUE(all_close(x.grad().to(DType::f64), dx64, 1e-5, 1e-5));
  EXPECT_FALSE(same_bits(y.detach(), y.detach().to(DType::bf16).to(DType::f32)))
      << "the result was rounded to bfloat16";
}

TEST(LoraLinear, ShapeErrors) {
  auto layer = nn::LoraLinear::create(8, 6, false);
  EXPECT_TRUE(throws_with(
      [&] {
        layer->set_adapter({.r = 2, .lora_alpha = 2, .lora_dropout = 0, .use_rslora = false},
                           Tensor::zeros({2, 7}), Tensor::zeros({6, 2}));
      },
      "adapter A [2, 7] and B [6, 2] do not fit a layer [6, 8] with r 2: expected A [2, 8]"));
  EXPECT_TRUE(throws_with(
      [&] {
        layer->add_adapter({.r = 0, .lora_alpha = 2, .lora_dropout = 0, .use_rslora = false});
      },
      "rank r must be positive"));
  EXPECT_TRUE(throws_with([&] { (void)layer->lora_A(); }, "has no adapter"));
}

}  // namespace
}  // namespace zenith::testing
