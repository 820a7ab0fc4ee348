// PEFT LoRA adapters on models::Llama against the reference (scripts/make_fixtures.py
// LORA_CASES): applied unmerged = merged = the reference's W + B A scaling; adapter gradients
// with the base frozen; greedy continuations; files round trip; targets as PEFT matches them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "support/llama_fixtures.h"
#include "support/op_check.h"
#include "support/temp_dir.h"
#include "support/tensor_bits.h"
#include "zenith/llama.h"

namespace zenith::testing {
namespace {

using models::Llama;

struct LoraCase {
  std::string name, base;
};

std::string PrintToString(const LoraCase& c) { return c.name; }

class LlamaLora : public ::testing::TestWithParam<LoraCase> {
 protected:
  std::shared_ptr<Llama> base(std::optional<DType> dtype = std::nullopt) const {
    return Llama::from_pretrained(llama_fixture(GetParam().base), dtype);
  }
  std::string adapter_dir() const { return llama_fixture(GetParam().name); }
};

TEST_P(LlamaLora, UnmergedEqualsTheReference) {
  auto ref = llama_reference(GetParam().name);
  auto model = base();
  model->freeze_base();
  models::load_lora(*model, adapter_dir());
  Tensor logits = model->forward(ref.at("input_ids"));
  Tensor loss = models::causal_lm_loss(logits, ref.at("labels"));
  const double e_logits = scaled_error(logits, ref.at("logits"));
  const double e_loss = scaled_error(loss, ref.at("loss"));
  EXPECT_LE(e_logits, kLlamaTolerance);
  EXPECT_LE(e_loss, kLlamaTolerance);
  loss.backward();
  double e_grad = 0;
  size_t adapters = 0;
  for (const auto& [name, p] : model->named_parameters()) {
    if (!p.requires_grad()) {
      EXPECT_FALSE(p.grad().defined()) << name << " is frozen";
      continue;
    }
    const std::string key = "grad.base_model.model." + name;
    ASSERT_TRUE(ref.count(key)) << key;
    const double e = scaled_error(p.grad(), ref.at(key));
    EXPECT_LE(e, kLlamaTolerance) << "gradient of " << name;
    e_grad = std::max(e_grad, e);
    ++adapters;
  }
  EXPECT_EQ(adapters, reference_gradients(ref));
  std::printf(
      "[ lora  ] %-22s on %s (%s base): logits %.2e, loss %.2e, %zu adapter gradients "
      "%.2e; tolerance %.0e\n",
      GetParam().name.c_str(), GetParam().base.c_str(), dtype_name(model->weight_dtype()), e_logits,
      e_loss, adapters, e_grad, kLlamaTolerance);
}

// Merged in float32 (the bf16 base's values exactly): the reference merges in float64 without
// rounding to bf16.
TEST_P(LlamaLora, MergedEqualsTheReference) {
  auto ref = llama_reference(GetParam().name);
  auto model = base(DType::f32);
  models::load_lora(*model, adapter_dir());
  const std::vector<std::string> merged = models::merge_lora(*model);
  EXPECT_EQ(merged.size(), io::load_lora_adapter(adapter_dir()).modules.size());
  for (const auto& [name, p] : model->named_parameters())
    EXPECT_EQ(name.find("lora_"), std::string::npos) << name << " survived the merge";
  auto weights = model->hf_state();
  double e_weights = 0;
  for (const auto& path : merged) {
    const double e =
        scaled_error(weights.at(path + ".weight"), ref.at("merged." + path + ".weight"));
    EXPECT_LE(e, 1e-6) << path;
    e_weights = std::max(e_weights, e);
  }
  NoGradGuard no_grad;
  Tensor logits = model->forward(ref.at("input_ids"));
  const double e_logits = scaled_error(logits, ref.at("merged.logits"));
  EXPECT_LE(e_logits, kLlamaTolerance);
  EXPECT_LE(scaled_error(logits, ref.at("logits")), kLlamaTolerance);  // merged = unmerged
  std::printf("[ lora  ] %-22s merged: %zu weights %.2e, logits %.2e\n", GetParam().name.c_str(),
              merged.size(), e_weights, e_logits);
}

// In the base's own dtype: W + B A scaling rounded once (nearest even) to bf16.
TEST_P(LlamaLora, MergeKeepsTheBaseDtype) {
  auto ref = llama_reference(GetParam().name);
  auto model = base();
  const DType dtype = model->weight_dtype();
  std::map<std::string, Tensor> before;  // copies: the merge writes into the weights' storage
  for (const auto& [name, w] : model->hf_state()) before[name] = w.clone();
  models::load_lora(*model, adapter_dir());
  std::map<std::string, Tensor> deltas;
  for (const auto& [path, layer] : model->linear_layers())
    if (layer->has_adapter()) deltas[path] = layer->delta_weight();
  models::merge_lora(*model);
  auto after = model->hf_state();
  for (const auto& [path, delta] : deltas) {
    const Tensor& w = after.at(path + ".weight");
    ASSERT_EQ(w.dtype(), dtype) << path;
    Tensor expected = ops::add(before.at(path + ".weight").to(DType::f32), delta).to(dtype);
    EXPECT_TRUE(same_bits(w, expected)) << path;
    // Within half a unit in the last place of the storage type of the exact merge.
    const double ulp = dtype == DType::bf16 ? std::ldexp(1.0, -8) : 1e-6;
    EXPECT_LE(scaled_error(w, ref.at("merged." + path + ".weight")), ulp) << path;
  }
}

TEST_P(LlamaLora, GreedyWithTheAdapterEqualsTheReference) {
  auto ref = llama_reference(GetParam().name);
  models::GenerationConfig g;
  g.temperature = 0;
  const std::vector<int64_t> expected = ref.at("greedy.tokens").to_int_vector();
  g.max_new_tokens = int64_t(expected.size());
  auto model = base();
  models::load_lora(*model, adapter_dir());
  EXPECT_EQ(models::generate(*model, ref.at("greedy.prompt").to_int_vector(), g).tokens, expected);
  auto merged = base(DType::f32);
  models::load_lora(*merged, adapter_dir());
  models::merge_lora(*merged);
  EXPECT_EQ(models::generate(*merged, ref.at("greedy.prompt").to_int_vector(), g).tokens, expected);
}

TEST_P(LlamaLora, SavedAdapterRoundTrips) {
  auto model = base();
  models::load_lora(*model, adapter_dir());
  const io::LoraAdapter original = io::load_lora_adapter(adapter_dir());
  TempDir tmp("lora_save");
  models::save_lora(*model, original.config, tmp.str());
  const io::LoraAdapter saved = io::load_lora_adapter(tmp.str());
  EXPECT_EQ(io::lora_config_json(saved.config), io::lora_config_json(original.config));
  ASSERT_EQ(saved.modules.size(), original.modules.size());
  for (const auto& [path, w] : original.modules) {
    EXPECT_TRUE(same_bits(saved.modules.at(path).A, w.A)) << path;
    EXPECT_TRUE(same_bits(saved.modules.at(path).B, w.B)) << path;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, LlamaLora,
                         ::testing::Values(LoraCase{"lora_qv", "llama_gqa"},
                                           LoraCase{"lora_all_linear_rslora", "llama_bf16"}),
                         [](const auto& info) { return info.param.name; });

TEST(LlamaLoraTargets, FreshAdaptersStartAtTheBase) {
  auto model = Llama::from_pretrained(llama_fixture("llama_bf16"));
  auto ids = llama_reference("llama_bf16").at("input_ids");
  NoGradGuard no_grad;
  Tensor before = model->forward(ids);
  io::LoraConfig config;
  config.r = 4;
  config.lora_alpha = 16;
  config.all_linear = true;
  const auto targets = models::add_lora(*model, config);
  EXPECT_EQ(targets.size(), 14u);  // every linear layer but lm_head
  for (const auto& [path, layer] : model->linear_layers()) {
    EXPECT_EQ(layer->has_adapter(), path != "lm_head") << path;
    if (!layer->has_adapter()) continue;
    EXPECT_EQ(layer->lora_A().dtype(), DType::f32);
    EXPECT_EQ(ops::max(ops::abs(layer->lora_B())).item(), 0.0) << path;
    const double bound = 1.0 / std::sqrt(double(layer->in_features()));  // kaiming, a = sqrt(5)
    EXPECT_LE(ops::max(ops::abs(layer->lora_A())).item(), bound) << path;
    EXPECT_GT(ops::max(ops::abs(layer->lora_A())).item(), 0.5 * bound) << path;
  }
  EXPECT_TRUE(same_bits(model->forward(ids), before));
}

TEST(LlamaLoraTargets, SuffixMatchAsPeft) {
  auto model = Llama::from_pretrained(llama_fixture("llama_gqa"));
  io::LoraConfig config;
  config.target_modules = {"mlp.up_proj", "o_proj", "lm_head"};
  config.layers_to_transform = {1};
  EXPECT_EQ(
      models::lora_targets(*model, config),
      (std::vector<std::string>{"model.layers.1.self_attn.o_proj", "model.layers.1.mlp.up_proj"}));
  config.layers_to_transform.clear();
  EXPECT_EQ(models::lora_targets(*model, config).size(), 5u);
}

TEST(LlamaLoraTargets, TargetsNotInTheModelListTheNames) {
  auto model = Llama::from_pretrained(llama_fixture("qwen2_bias"));
  io::LoraConfig config;
  config.target_modules = {"q_proj", "qkv_proj", "lm_head"};
  EXPECT_TRUE(throws_with([&] { models::add_lora(*model, config); },
                          "[lora] target modules 'qkv_proj', 'lm_head' not in the model; its "
                          "linear layers are q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, "
                          "down_proj"));
  config.target_modules = {"q_proj"};
  config.r = 0;
  EXPECT_TRUE(throws_with([&] { models::add_lora(*model, config); }, "r must be positive"));
}

TEST(LlamaLoraTargets, AdapterForAnotherBaseNamesTheTensor) {
  auto model = Llama::from_pretrained(llama_fixture("mistral_head_dim"));
  EXPECT_TRUE(throws_with(
      [&] { models::load_lora(*model, llama_fixture("lora_qv")); },
      "tensor 'base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight' has shape [32, 4]; "
      "the base model's model.layers.0.self_attn.q_proj has 64 outputs, so lora_B must be [64, "
      "4]"));
  for (const auto& [path, layer] : model->linear_layers())
    EXPECT_FALSE(layer->has_adapter()) << path << ": a failed load changed the model";
}

}  // namespace
}  // namespace zenith::testing
