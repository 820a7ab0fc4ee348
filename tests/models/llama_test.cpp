// models::Llama against the PyTorch reference of every fixture case (scripts/make_fixtures.py):
// logits, loss and every parameter gradient to max|x - ref| <= 1e-4 max|ref|; greedy
// continuations equal; cached decoding = recomputation; export -> import bit-exact; sharded =
// unsharded; bad files and inputs are clear errors.
#include "zenith/llama.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/allocator.h"
#include "support/files.h"
#include "support/llama_fixtures.h"
#include "support/op_check.h"
#include "support/temp_dir.h"
#include "support/tensor_bits.h"

namespace zenith::testing {
namespace {

namespace fs = std::filesystem;
using models::Llama;
using models::LlamaInput;

LlamaInput input_of(const std::map<std::string, Tensor>& ref) {
  LlamaInput in;
  in.input_ids = ref.at("input_ids");
  if (ref.count("attention_mask")) in.attention_mask = ref.at("attention_mask");
  if (ref.count("position_ids")) in.position_ids = ref.at("position_ids");
  return in;
}

Tensor valid_mask(const std::map<std::string, Tensor>& ref) {
  return ref.count("attention_mask") ? ref.at("attention_mask") : Tensor();
}

class LlamaCase : public ::testing::TestWithParam<std::string> {
 protected:
  std::string dir() const { return llama_fixture(GetParam()); }
};

TEST_P(LlamaCase, LogitsLossAndEveryGradientMatchTheReference) {
  auto ref = llama_reference(GetParam());
  auto model = Llama::from_pretrained(dir());  // bf16 files stay bf16
  Tensor logits = model->forward(input_of(ref));
  Tensor loss = models::causal_lm_loss(logits, ref.at("labels"));
  const double e_logits = scaled_error(logits, ref.at("logits"), valid_mask(ref));
  const double e_loss = scaled_error(loss, ref.at("loss"));
  EXPECT_LE(e_logits, kLlamaTolerance);
  EXPECT_LE(e_loss, kLlamaTolerance);

  // A bf16 leaf accumulates its gradient in bf16; the gradient of the loss at the bf16 values is
  // taken on their exact float32 copies.
  if (model->weight_dtype() != DType::f32) {
    model = Llama::from_pretrained(dir(), DType::f32);
    loss = models::causal_lm_loss(model->forward(input_of(ref)), ref.at("labels"));
  }
  loss.backward();
  double e_grad = 0;
  std::string worst;
  size_t compared = 0;
  for (const auto& [name, p] : model->named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    ASSERT_TRUE(ref.count("grad." + name)) << name;
    const double e = scaled_error(p.grad(), ref.at("grad." + name));
    EXPECT_LE(e, kLlamaTolerance) << "gradient of " << name;
    if (e >= e_grad) std::tie(e_grad, worst) = std::make_pair(e, name);
    ++compared;
  }
  EXPECT_EQ(compared, reference_gradients(ref));
  std::printf(
      "[ llama ] %-18s max error / max|ref|: logits %.2e, loss %.2e, %zu gradients %.2e "
      "(%s); tolerance %.0e\n",
      GetParam().c_str(), e_logits, e_loss, compared, e_grad, worst.c_str(), kLlamaTolerance);
}

TEST_P(LlamaCase, GreedyContinuationEqualsTheReference) {
  auto ref = llama_reference(GetParam());
  auto model = Llama::from_pretrained(dir());
  const std::vector<int64_t> expected = ref.at("greedy.tokens").to_int_vector();
  models::GenerationConfig g;
  g.max_new_tokens = int64_t(expected.size());
  g.temperature = 0;
  g.eos_token_ids = model->config().eos_token_ids;
  std::vector<int64_t> streamed;
  auto out = models::generate(*model, ref.at("greedy.prompt").to_int_vector(), g,
                              [&](int64_t id) { streamed.push_back(id); });
  EXPECT_EQ(out.tokens, expected);
  EXPECT_EQ(streamed, expected);
  EXPECT_EQ(out.stop_reason, "max_new_tokens");
}

TEST_P(LlamaCase, CachedDecodingEqualsRecomputation) {
  auto ref = llama_reference(GetParam());
  auto model = Llama::from_pretrained(dir());
  NoGradGuard no_grad;
  std::vector<int64_t> ids = ref.at("greedy.prompt").to_int_vector();
  for (int64_t t : ref.at("greedy.tokens").to_int_vector()) ids.push_back(t);
  const auto n = int64_t(ids.size());
  Tensor full = model->forward(Tensor::from_vector(ids, {1, n}));
  // The prompt in one pass (into a cache too small, so it grows), then one token at a time.
  models::KVCache cache(model->config(), 1, 2);
  LlamaInput in;
  in.cache = &cache;
  in.input_ids = Tensor::from_vector(std::vector<int64_t>(ids.begin(), ids.begin() + 5), {1, 5});
  std::vector<Tensor> steps = {model->forward(in)};
  for (int64_t t = 5; t < n; ++t) {
    in.input_ids = Tensor::from_vector(std::vector<int64_t>{ids[size_t(t)]}, {1, 1});
    steps.push_back(model->forward(in));
  }
  EXPECT_EQ(cache.length(), n);
  EXPECT_GE(cache.capacity(), n);
  EXPECT_LE(scaled_error(ops::cat(steps, 1), full), 1e-5);
}

TEST_P(LlamaCase, ExportImportIsBitExact) {
  auto model = Llama::from_pretrained(dir());
  TempDir tmp("llama_export");
  model->save_pretrained(tmp.str());
  EXPECT_TRUE(same_state(io::load_hf_state(tmp.str()), io::load_hf_state(dir())));
  auto again = Llama::from_pretrained(tmp.str());
  EXPECT_TRUE(same_state(again->hf_state(), model->hf_state()));
  EXPECT_EQ(models::llama_config_json(again->config()), models::llama_config_json(model->config()));
  // config.json keeps every key of the original (transformers_version, initializer_range, ...);
  // it may add the defaults save_pretrained writes (pad_token_id, head_dim, rope_type).
  const nlohmann::json saved = read_json(tmp / "config.json");
  const nlohmann::json original = read_json(dir() + "/config.json");
  for (const auto& [key, value] : original.items())
    if (key != "rope_scaling") {
      EXPECT_EQ(saved[key], value) << key;
    }
}

TEST_P(LlamaCase, ShardedEqualsUnsharded) {
  auto model = Llama::from_pretrained(dir());
  TempDir tmp("llama_shards");
  model->save_pretrained(tmp.str(), 20'000);
  ASSERT_TRUE(fs::exists(tmp / "model.safetensors.index.json"));
  ASSERT_FALSE(fs::exists(tmp / "model.safetensors"));
  auto sharded = Llama::from_pretrained(tmp.str());
  EXPECT_TRUE(same_state(sharded->hf_state(), model->hf_state()));
  auto ref = llama_reference(GetParam());
  NoGradGuard no_grad;
  EXPECT_TRUE(same_bits(sharded->forward(input_of(ref)), model->forward(input_of(ref))));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, LlamaCase, ::testing::ValuesIn(llama_cases()),
                         [](const auto& info) { return info.param; });

// ---- the model's structure

TEST(Llama, ParametersAreHfNamesInModelOrder) {
  auto model = Llama::from_pretrained(llama_fixture("qwen2_bias"));
  std::vector<std::string> names;
  for (const auto& [name, _] : model->named_parameters()) names.push_back(name);
  std::vector<std::string> expected;
  for (const auto& p : models::expected_llama_parameters(model->config()))
    expected.push_back(p.name);
  EXPECT_EQ(names, expected);
  EXPECT_EQ(model->linear_layers().size(), 14u);  // tied: no lm_head
  EXPECT_EQ(model->weight_dtype(), DType::f32);
}

TEST(Llama, F16WeightsStayF16WithFloat32Compute) {
  auto ref = llama_reference("llama_gqa");
  const size_t live = core::allocator_stats().live_bytes;
  core::reset_peak_live_bytes();
  auto model = Llama::from_pretrained(llama_fixture("llama_gqa"), DType::f16);
  // Each float32 tensor is converted as it is read: the float32 state never exists whole, and
  // its blocks are not left in the allocator's cache.
  size_t f16_bytes = 0, largest = 0;
  for (const auto& [name, w] : model->hf_state()) {
    EXPECT_EQ(w.dtype(), DType::f16) << name;
    f16_bytes += w.nbytes();
    largest = std::max(largest, w.nbytes());
  }
  const auto stats = core::allocator_stats();
  EXPECT_LE(stats.peak_live_bytes - live, f16_bytes * 9 / 8 + 2 * largest * 9 / 8 + 4096);
  EXPECT_LT(stats.cached_bytes, f16_bytes / 4);
  NoGradGuard no_grad;
  Tensor logits = model->forward(ref.at("input_ids"));
  EXPECT_EQ(logits.dtype(), DType::f32);
  // Only the weights' rounding to f16 (11 significant bits) separates it from the reference.
  EXPECT_LE(scaled_error(logits, ref.at("logits")), 5e-3);
  EXPECT_GT(scaled_error(logits, ref.at("logits")), kLlamaTolerance / 100);
}

TEST(Llama, RandomInitialisationAsTransformers) {
  auto config = models::load_llama_config(llama_fixture("llama_gqa"));
  manual_seed(7);
  Llama model(config, DType::bf16);
  // The float32 draws are not left in the allocator's cache (resident under a LoRA's peak).
  EXPECT_LT(core::allocator_stats().cached_bytes, model.num_parameters() * 4 / 8);
  auto state = model.hf_state();
  EXPECT_EQ(state.size(), models::expected_llama_parameters(config).size());
  EXPECT_EQ(state.at("model.layers.0.self_attn.q_proj.weight").dtype(), DType::bf16);
  EXPECT_TRUE(all_close(state.at("model.norm.weight").to(DType::f32), Tensor::ones({32}), 0, 0));
  // normal(0, initializer_range = 0.02)
  std::vector<double> w = state.at("lm_head.weight").to_double_vector();
  double sum = 0, sq = 0;
  for (double v : w) sum += v, sq += v * v;
  const double mean = sum / double(w.size()), stddev = std::sqrt(sq / double(w.size()));
  EXPECT_NEAR(mean, 0.0, 0.002);
  EXPECT_NEAR(stddev, 0.02, 0.002);
}

TEST(Llama, ActivationCheckpointingGivesTheSameGradients) {
  auto ref = llama_reference("llama_gqa");
  std::map<std::string, Tensor> grads[2];
  for (int checkpointing = 0; checkpointing < 2; ++checkpointing) {
    auto model = Llama::from_pretrained(llama_fixture("llama_gqa"));
    model->set_activation_checkpointing(checkpointing == 1);
    // LoRA with dropout: the recomputation must draw the same dropout masks.
    io::LoraConfig lora;
    lora.r = 2;
    lora.lora_dropout = 0.3;
    lora.target_modules = {"q_proj", "down_proj"};
    manual_seed(11);
    models::add_lora(*model, lora);
    for (auto& [path, layer] : model->linear_layers())
      if (layer->has_adapter()) {
        Tensor b = layer->lora_B();
        b.copy_(Tensor::full(b.shape(), 0.05));
      }
    manual_seed(12);
    models::causal_lm_loss(model->forward(ref.at("input_ids")), ref.at("labels")).backward();
    for (const auto& [name, p] : model->named_parameters()) grads[checkpointing][name] = p.grad();
  }
  ASSERT_EQ(grads[0].size(), grads[1].size());
  for (const auto& [name, g] : grads[0])
    EXPECT_LE(scaled_error(grads[1].at(name), g), 1e-6) << name;
}

TEST(Llama, FreezeBaseKeepsAdaptersTrainable) {
  auto model = Llama::from_pretrained(llama_fixture("llama_gqa"));
  io::LoraConfig lora;
  lora.r = 2;
  lora.target_modules = {"v_proj"};
  models::add_lora(*model, lora);
  model->freeze_base();
  std::vector<std::string> trainable;
  for (const auto& [name, p] : model->named_parameters())
    if (p.requires_grad()) trainable.push_back(name);
  EXPECT_EQ(trainable, (std::vector<std::string>{"model.layers.0.self_attn.v_proj.lora_A.weight",
                                                 "model.layers.0.self_attn.v_proj.lora_B.weight",
                                                 "model.layers.1.self_attn.v_proj.lora_A.weight",
                                                 "model.layers.1.self_attn.v_proj.lora_B.weight"}));
}

// ---- bad files and inputs: clear errors naming the file, the key, the tensor

// A copy of a fixture model directory whose config.json has `edit` applied.
std::string edited_copy(const TempDir& tmp, const std::string& name,
                        const std::function<void(nlohmann::json&)>& edit) {
  const std::string out = tmp / name;
  fs::create_directories(out);
  fs::copy_file(llama_fixture(name) + "/model.safetensors", out + "/model.safetensors");
  nlohmann::json config = read_json(llama_fixture(name) + "/config.json");
  edit(config);
  write_bytes(out + "/config.json", config.dump(2));
  return out;
}

TEST(LlamaErrors, UnknownArchitectureListsTheSupported) {
  TempDir tmp("llama_errors");
  auto dir = edited_copy(tmp, "llama_gqa", [](nlohmann::json& c) {
    c["architectures"] = {"GPT2LMHeadModel"};
    c.erase("model_type");
  });
  EXPECT_TRUE(throws_with([&] { Llama::from_pretrained(dir); }, "GPT2LMHeadModel"));
  EXPECT_TRUE(throws_with([&] { Llama::from_pretrained(dir); },
                          "supported: LlamaForCausalLM (model_type llama), MistralForCausalLM"));
  EXPECT_TRUE(throws_with([&] { Llama::from_pretrained(dir); }, "config.json"));
}

TEST(LlamaErrors, ShapeMismatchNamesTheTensorAndBothShapes) {
  TempDir tmp("llama_errors");
  auto dir = edited_copy(tmp, "llama_gqa", [](nlohmann::json& c) { c["intermediate_size"] = 48; });
  EXPECT_TRUE(throws_with([&] { Llama::from_pretrained(dir); },
                          "tensor 'model.layers.0.mlp.gate_proj.weight' in " + dir +
                              "/model.safetensors has shape [64, 32], config.json gives [48, 32]"));
}

TEST(LlamaErrors, MissingShardNamesIt) {
  TempDir tmp("llama_errors");
  Llama::from_pretrained(llama_fixture("llama_gqa"))->save_pretrained(tmp.str(), 20'000);
  std::string shard;
  for (const auto& entry : fs::directory_iterator(tmp.path()))
    if (entry.path().filename().string().rfind("model-00002-of-", 0) == 0)
      shard = entry.path().filename().string();
  ASSERT_FALSE(shard.empty());
  fs::remove(tmp / shard);
  EXPECT_TRUE(throws_with([&] { Llama::from_pretrained(tmp.str()); },
                          "model.safetensors.index.json: shard " + shard));
  EXPECT_TRUE(throws_with([&] { Llama::from_pretrained(tmp.str()); }, "is missing from"));
}

TEST(LlamaErrors, TruncatedWeightsNameTheFile) {
  TempDir tmp("llama_errors");
  auto dir = edited_copy(tmp, "llama_gqa", [](nlohmann::json&) {});
  const std::string bytes = read_bytes(dir + "/model.safetensors");
  write_bytes(dir + "/model.safetensors", bytes.substr(0, bytes.size() - 100));
  EXPECT_TRUE(
      throws_with([&] { Llama::from_pretrained(dir); }, dir + "/model.safetensors: tensor"));
  EXPECT_TRUE(throws_with([&] { Llama::from_pretrained(dir); }, "truncated?"));
}

TEST(LlamaErrors, TokenIdsPastTheVocabulary) {
  auto model = Llama::from_pretrained(llama_fixture("llama_gqa"));
  Tensor ids = Tensor::from_vector(std::vector<int64_t>{1, 2, 128}, {1, 3});
  EXPECT_TRUE(throws_with([&] { model->forward(ids); },
                          "token id 128 at position 2 of sequence 0 is outside the vocabulary "
                          "[0, 128)"));
  models::GenerationConfig g;
  EXPECT_TRUE(throws_with(
      [&] {
        models::generate(*model, {5, -1}, g);
      },
      "prompt token id -1 at position 1 is outside the model's vocabulary"));
  EXPECT_TRUE(throws_with(
      [&] {
        models::perplexity(*model, {5, 300});
      },
      "token id 300 at position 1"));
}

TEST(LlamaErrors, PromptPastTheContext) {
  TempDir tmp("llama_errors");
  auto dir =
      edited_copy(tmp, "llama_gqa", [](nlohmann::json& c) { c["max_position_embeddings"] = 8; });
  auto model = Llama::from_pretrained(dir);
  models::GenerationConfig g;
  g.temperature = 0;
  g.max_new_tokens = 5;
  EXPECT_TRUE(throws_with(
      [&] {
        models::generate(*model, {1, 2, 3, 4, 5, 6, 7, 8}, g);
      },
      "the prompt has 8 tokens, but the model's context "
      "(max_position_embeddings in config.json) is 8 tokens"));
  // A prompt that fits: generation stops when the context is full.
  auto out = models::generate(*model, {1, 2, 3, 4, 5, 6}, g);
  EXPECT_EQ(out.tokens.size(), 2u);
  EXPECT_EQ(out.stop_reason, "context");
  EXPECT_TRUE(throws_with(
      [&] {
        models::perplexity(*model, {1, 2, 3}, 9);
      },
      "max_seq_len 9 is past the model's context"));
}

TEST(LlamaErrors, BadInputShapes) {
  auto model = Llama::from_pretrained(llama_fixture("llama_gqa"));
  LlamaInput in;
  in.input_ids = Tensor::from_vector(std::vector<int64_t>{1, 2, 3}, {1, 3});
  in.attention_mask = Tensor::ones({1, 4}, DType::i64);
  EXPECT_TRUE(
      throws_with([&] { model->forward(in); }, "attention_mask has shape [1, 4], expected [1, 3]"));
  EXPECT_TRUE(
      throws_with([&] { model->forward(Tensor::from_vector(std::vector<int64_t>{1}, {1})); },
                  "input_ids must be [batch, seq], got [1]"));
  EXPECT_TRUE(throws_with(
      [&] {
        model->forward(Tensor::ones({1, 2}));
      },
      "input_ids must be integer, got float32"));
}

}  // namespace
}  // namespace zenith::testing
