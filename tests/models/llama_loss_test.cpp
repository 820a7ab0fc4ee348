// causal_lm_loss of the model in chunks (src/models/llama_loss.cpp) against the loss of the whole
// logits: the same value and the same gradients, for full fine-tuning (untied and tied heads)
// and LoRA with an adapter on lm_head, with masked labels and a chunk of masked positions.
#include <gtest/gtest.h>

#include "support/llama_fixtures.h"
#include "zenith/autograd.h"
#include "zenith/llama.h"
#include "zenith/random.h"

namespace zenith::testing {
namespace {

using models::Llama;

// A vocabulary of 32000 makes chunks of 131 positions: [3, 100] has three chunks.
models::LlamaConfig tiny(bool tied) {
  models::LlamaConfig c;
  c.vocab_size = 32000;
  c.hidden_size = 16;
  c.intermediate_size = 32;
  c.num_hidden_layers = 2;
  c.num_attention_heads = c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.max_position_embeddings = 128;
  c.tie_word_embeddings = tied;
  return c;
}

struct Run {
  double loss;
  std::map<std::string, Tensor> grads;
};

Run run(bool tied, bool lora, bool chunked, const Tensor& ids, const Tensor& labels) {
  manual_seed(3);
  Llama model(tiny(tied));
  if (lora) {
    io::LoraConfig config;
    config.r = 2;
    config.target_modules = {"v_proj", "lm_head"};
    models::add_lora(model, config);
    for (auto& [path, layer] : model.linear_layers())
      if (layer->has_adapter()) {
        Tensor b = layer->lora_B();
        // Random, not constant: a constant B sums each row of the logits' gradient, which is 0.
        b.copy_(Tensor::randn(b.shape()) * 0.02);
      }
    model.freeze_base();
  }
  models::LlamaInput in;
  in.input_ids = ids;
  Tensor loss = chunked ? models::causal_lm_loss(model, in, labels)
                        : models::causal_lm_loss(model.forward(in), labels);
  (loss * 3.0).backward();  // a non-unit upstream gradient
  Run r{loss.item(), {}};
  for (const auto& [name, p] : model.named_parameters())
    if (p.requires_grad()) r.grads[name] = p.grad();
  return r;
}

void expect_same(bool tied, bool lora) {
  manual_seed(1);
  Tensor ids = Tensor::randint(0, 32000, {3, 100});
  std::vector<int64_t> l = ids.to_int_vector();
  for (size_t i = 0; i < 40; ++i) l[i] = -100;         // a prompt masked out
  for (size_t i = 131; i < 262; ++i) l[i + 1] = -100;  // the whole second chunk masked
  Tensor labels = Tensor::from_vector(l, {3, 100});
  const Run whole = run(tied, lora, false, ids, labels);
  const Run chunked = run(tied, lora, true, ids, labels);
  EXPECT_NEAR(chunked.loss, whole.loss, 1e-5 * std::abs(whole.loss));
  ASSERT_EQ(chunked.grads.size(), whole.grads.size());
  ASSERT_FALSE(whole.grads.empty());
  for (const auto& [name, g] : whole.grads) {
    ASSERT_TRUE(g.defined()) << name;
    ASSERT_TRUE(chunked.grads.at(name).defined()) << name;
    EXPECT_LE(scaled_error(chunked.grads.at(name), g), 1e-5) << name;
  }
}

TEST(LlamaLoss, ChunkedEqualsWholeLogitsFullUntied) { expect_same(false, false); }
TEST(LlamaLoss, ChunkedEqualsWholeLogitsFullTied) { expect_same(true, false); }
TEST(LlamaLoss, ChunkedEqualsWholeLogitsLoraOnTheHead) { expect_same(false, true); }

TEST(LlamaLoss, WithoutGradientsItIsTheLossOfTheLogits) {
  manual_seed(2);
  Llama model(tiny(false));
  Tensor ids = Tensor::randint(0, 32000, {2, 20});
  models::LlamaInput in;
  in.input_ids = ids;
  NoGradGuard no_grad;
  EXPECT_DOUBLE_EQ(models::causal_lm_loss(model, in, ids).item(),
                   models::causal_lm_loss(model.forward(in), ids).item());
}

TEST(LlamaLoss, LabelsOfAnotherShapeAreAClearError) {
  Llama model(tiny(false));
  models::LlamaInput in;
  in.input_ids = Tensor::randint(0, 32000, {2, 20});
  try {
    models::causal_lm_loss(model, in, Tensor::randint(0, 32000, {2, 19}));
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("[llama] labels has shape [2, 19], expected [2, 20]"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace zenith::testing
