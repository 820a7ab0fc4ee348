// LoraLinear on a quantized base weight (src/nn/lora.cpp): the forward is quantized_linear plus
// the adapter's delta, gradients reach the adapter and the input but not the base, and a
// quantized base refuses to merge.
#include <gtest/gtest.h>

#include "support/op_check.h"
#include "zenith/lora.h"

namespace zenith::testing {
namespace {

TEST(LoraQuant, QuantizedBaseWithAnAdapter) {
  auto layer = nn::LoraLinear::create(64, 24, /*has_bias=*/true);
  const Tensor bias = layer->bias();
  nn::LoraSpec spec;
  spec.r = 4;
  spec.lora_alpha = 8;
  layer->add_adapter(spec);
  Tensor B = Tensor::randn({24, 4});
  layer->set_adapter(spec, Tensor::randn({4, 64}), B);
  layer->quantize(QuantFormat::q8_0);
  const QuantizedWeight* q = layer->quantized_weight();
  ASSERT_NE(q, nullptr);
  EXPECT_FALSE(layer->weight().defined());
  EXPECT_EQ(layer->in_features(), 64);
  EXPECT_EQ(layer->out_features(), 24);
  for (const auto& [name, p] : layer->named_parameters()) EXPECT_NE(name, "weight");

  Tensor x = Tensor::randn({3, 64}).requires_grad_();
  Tensor y = layer->forward(x);
  Tensor delta = ops::mul(ops::linear(ops::linear(x.detach(), layer->lora_A()), layer->lora_B()),
                          spec.scaling());
  Tensor want = ops::add(ops::add(ops::quantized_linear(x.detach(), *q), bias.detach()), delta);
  EXPECT_TRUE(all_close(y, want, 1e-5, 1e-5));
  ops::sum(y).backward();
  EXPECT_TRUE(x.grad().defined());
  EXPECT_TRUE(layer->lora_B().grad().defined());
  EXPECT_TRUE(throws_with([&] { layer->merge(); }, "the base weight is quantized (q8_0)"));
  EXPECT_TRUE(throws_with([&] { layer->quantize(QuantFormat::q4_0); },
                          "the weight is already q8_0; cannot requantize it to q4_0"));
}

}  // namespace
}  // namespace zenith::testing
