// Activation checkpointing of the decoder layers (src/models/llama_checkpoint.cpp): selective
// (kept GEMM outputs, the rest recomputed) and full give the loss and gradients of no
// checkpointing, free what they kept in backward, refuse a second backward or a recompute that
// differs from the forward, and cut the activation memory.
#include <gtest/gtest.h>

#include "core/allocator.h"
#include "models/llama_layers.h"
#include "support/llama_fixtures.h"
#include "support/op_check.h"
#include "zenith/autograd.h"
#include "zenith/llama.h"
#include "zenith/random.h"

namespace zenith::testing {
namespace {

using models::Llama;
constexpr int64_t kBatch = 2, kSeq = 12;
const char* kEverything = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj,attention";

models::LlamaConfig tiny(bool tied, int64_t layers = 2) {
  models::LlamaConfig c;
  c.vocab_size = 48;
  c.hidden_size = 16;
  c.intermediate_size = 40;
  c.num_hidden_layers = layers;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;  // grouped-query
  c.head_dim = 4;
  c.max_position_embeddings = 64;
  c.tie_word_embeddings = tied;
  return c;
}

// off: no checkpointing; else the policy.
std::unique_ptr<Llama> make_model(bool tied, bool lora, const std::string& policy,
                                  int64_t layers = 2) {
  manual_seed(5);
  auto model = std::make_unique<Llama>(tiny(tied, layers));
  if (lora) {
    io::LoraConfig config;
    config.r = 2;
    config.lora_dropout = 0.2;  // the recompute must draw the same masks
    config.target_modules = {"q_proj", "v_proj", "up_proj", "down_proj"};
    models::add_lora(*model, config);
    for (auto& [path, layer] : model->linear_layers())
      if (layer->has_adapter()) {
        Tensor b = layer->lora_B();
        b.copy_(Tensor::randn(b.shape()) * 0.05);
      }
    model->freeze_base();
  }
  model->train();
  if (policy != "off") model->set_activation_checkpointing(true, policy);
  return model;
}

Tensor ids() {
  manual_seed(9);
  return Tensor::randint(0, 48, {kBatch, kSeq});
}

Tensor loss_of(Llama& model, const Tensor& x) {
  manual_seed(13);
  models::LlamaInput in;
  in.input_ids = x;
  return models::causal_lm_loss(model.forward(in), x);
}

struct PolicyRun {
  double loss;
  std::map<std::string, Tensor> grads;
};

PolicyRun run(bool tied, bool lora, const std::string& policy) {
  auto model = make_model(tied, lora, policy);
  Tensor loss = loss_of(*model, ids());
  (loss * 2.0).backward();
  EXPECT_EQ(models::detail::checkpoint_kept_bytes(), 0) << policy << ": kept after backward";
  PolicyRun r{loss.item(), {}};
  for (const auto& [name, p] : model->named_parameters())
    if (p.requires_grad()) r.grads[name] = p.grad();
  return r;
}

class CheckpointPolicy : public ::testing::TestWithParam<std::string> {};

TEST_P(CheckpointPolicy, SameLossAndGradientsAsNoCheckpointing) {
  for (bool tied : {false, true})
    for (bool lora : {false, true}) {
      SCOPED_TRACE(std::string(tied ? "tied" : "untied") + (lora ? " lora" : " full"));
      const PolicyRun off = run(tied, lora, "off");
      const PolicyRun on = run(tied, lora, GetParam());
      EXPECT_NEAR(on.loss, off.loss, 1e-6 * std::abs(off.loss));
      ASSERT_EQ(on.grads.size(), off.grads.size());
      ASSERT_GE(off.grads.size(), lora ? 16u : 20u);
      for (const auto& [name, g] : off.grads) {
        ASSERT_TRUE(g.defined()) << name;
        ASSERT_TRUE(on.grads.at(name).defined()) << name;
        EXPECT_LE(scaled_error(on.grads.at(name), g), 1e-6) << name;
      }
    }
}

INSTANTIATE_TEST_SUITE_P(Llama, CheckpointPolicy,
                         ::testing::Values("selective", "full", kEverything, "attention,o_proj"));

TEST(LlamaCheckpoint, SelectiveKeepsTheGemmOutputsUntilBackward) {
  auto model = make_model(false, true, "selective");
  ASSERT_EQ(model->checkpointing_keeps(),
            (std::vector<std::string>{"gate_proj", "up_proj", "down_proj"}));
  Tensor loss = loss_of(*model, ids());
  // Per layer and token: gate and up [40] and down [16] in float32.
  EXPECT_EQ(models::detail::checkpoint_kept_bytes(), 2 * kBatch * kSeq * (40 + 40 + 16) * 4);
  loss.backward();
  EXPECT_EQ(models::detail::checkpoint_kept_bytes(), 0);
  // Full keeps nothing but each layer's input (held by the graph, not a stash).
  auto full = make_model(false, true, "full");
  Tensor loss_full = loss_of(*full, ids());
  EXPECT_EQ(models::detail::checkpoint_kept_bytes(), 0);
}

TEST(LlamaCheckpoint, ASecondBackwardThroughKeptOutputsFails) {
  auto model = make_model(false, true, "selective");
  Tensor loss = loss_of(*model, ids());
  loss.backward(Tensor(), /*retain_graph=*/true);
  EXPECT_TRUE(throws_with([&] { loss.backward(); },
                          "decoder layer 1: a second backward through a selectively checkpointed "
                          "layer"));
  // Full checkpointing recomputes from the layer input: a retained graph backs twice.
  auto full = make_model(false, true, "full");
  Tensor loss_full = loss_of(*full, ids());
  loss_full.backward(Tensor(), true);
  EXPECT_NO_THROW(loss_full.backward());
}

TEST(LlamaCheckpoint, ARecomputeThatDiffersFromTheForwardFails) {
  manual_seed(2);
  Tensor w = Tensor::randn({6, 4});
  Tensor x = Tensor::randn({3, 4}).requires_grad_(true);
  int calls = 0;
  auto fn = [&](const Tensor& h) {
    // The recompute reads fewer rows than the forward did: another shape for the kept linear.
    Tensor in = ++calls == 1 ? h : h.slice(0, 0, 2);
    return ops::sum(ops::linear(in, w), {0});
  };
  models::detail::KeptOutputs keep;
  keep.weights = {w};
  keep.where = "layer under test";
  Tensor y = models::detail::checkpoint(fn, x, {}, keep);
  EXPECT_GT(models::detail::checkpoint_kept_bytes(), 0);
  EXPECT_TRUE(throws_with([&] { ops::sum(y, {0}).backward(); },
                          "[checkpoint] layer under test: kept output 1 of 1 came from linear on "
                          "[3, 4], [6, 4], [], but the recompute asks for linear on [2, 4]"));
  // A recompute that skips a kept op.
  calls = 0;
  auto skips = [&](const Tensor& h) {
    return ++calls == 1 ? ops::sum(ops::linear(h, w), {0}) : ops::sum(h, {0}).slice(0, 0, 4);
  };
  Tensor z = models::detail::checkpoint(skips, x, {}, keep);
  EXPECT_TRUE(throws_with([&] { ops::sum(z, {0}).backward(); },
                          "the recompute used 0 of the 1 outputs its forward kept"));
}

TEST(LlamaCheckpoint, UnknownPolicyNamesTheKnownOnes) {
  Llama model(tiny(false));
  EXPECT_TRUE(throws_with([&] { model.set_activation_checkpointing(true, "q_proj,qkv"); },
                          "policy 'q_proj,qkv': unknown 'qkv' (expected selective, full, or a "
                          "comma list of q_proj"));
  EXPECT_TRUE(throws_with([&] { model.set_activation_checkpointing(true, ""); }, "is empty"));
  EXPECT_FALSE(model.activation_checkpointing());
}

// The allocator's peak of live bytes over forward and backward, less the bytes live before.
size_t activation_bytes(const std::string& policy) {
  auto model = make_model(false, true, policy, 6);
  Tensor x = ids();
  const size_t live = core::allocator_stats().live_bytes;
  core::reset_peak_live_bytes();
  loss_of(*model, x).backward();
  return core::allocator_stats().peak_live_bytes - live;
}

TEST(LlamaCheckpoint, CutsThePeakActivationBytes) {
  const double off = double(activation_bytes("off"));
  const double selective = double(activation_bytes("selective"));
  const double full = double(activation_bytes("full"));
  // Per layer and token, float32 values alive until backward: off ~ 9 x 16 + 3 x 40 (+ LoRA's),
  // selective the input, gate, up and down (16 + 40 + 40 + 16), full the input (16); the
  // layer being recomputed holds all of its own.
  EXPECT_LE(selective, 0.65 * off) << "off " << off << ", selective " << selective;
  EXPECT_LE(full, 0.45 * off) << "off " << off << ", full " << full;
  EXPECT_LT(full, selective);
}

}  // namespace
}  // namespace zenith::testing
