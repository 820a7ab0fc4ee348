// config.json of the LLaMA family: published configs read with transformers' defaults, written
// back unchanged, the parameters they imply under HF's names, and errors naming the file and the
// key (or the tensor) for everything a user can get wrong.
#include "zenith/llama_config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/op_check.h"
#include "support/temp_dir.h"

using zenith::DType;
using zenith::Shape;
using zenith::Tensor;
using zenith::models::LlamaConfig;
using zenith::models::RopeScaling;
using zenith::testing::TempDir;
using zenith::testing::throws_with;
namespace models = zenith::models;
namespace io = zenith::io;

namespace {

// config.json files as the Hugging Face Hub serves them.
const char* kTinyLlama = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "bos_token_id": 1,
  "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
  "intermediate_size": 5632, "max_position_embeddings": 2048, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 22, "num_key_value_heads": 4,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": null, "rope_theta": 10000.0,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.35.0",
  "use_cache": true, "vocab_size": 32000})";
const char* kLlama32 = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "head_dim": 64,
  "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
  "intermediate_size": 8192, "max_position_embeddings": 131072, "mlp_bias": false,
  "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 16,
  "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "transformers_version": "4.45.0.dev0", "use_cache": true, "vocab_size": 128256})";
const char* kQwen2 = R"({
  "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
  "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
  "intermediate_size": 4864, "max_position_embeddings": 131072, "max_window_layers": 24,
  "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24,
  "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
  "sliding_window": 131072, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "transformers_version": "4.40.1", "use_cache": true, "use_sliding_window": false,
  "vocab_size": 151936})";
const char* kMistral03 = R"({
  "architectures": ["MistralForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1,
  "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
  "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mistral",
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "sliding_window": null,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.42.0.dev0",
  "use_cache": true, "vocab_size": 32768})";

LlamaConfig parse(const std::string& text) {
  return models::parse_llama_config(text, "config.json");
}

// `base` with `change` merged in (a null value removes the key).
std::string patched(const char* base, const nlohmann::json& change) {
  auto j = nlohmann::json::parse(base);
  j.merge_patch(change);
  return j.dump();
}

bool fails(const char* base, const nlohmann::json& change, const std::string& needle) {
  return throws_with([&] { parse(patched(base, change)); }, "config.json: key " + needle);
}

TEST(LlamaConfig, ReadsPublishedConfigs) {
  LlamaConfig t = parse(kTinyLlama);
  EXPECT_EQ(t.architecture, "LlamaForCausalLM");
  EXPECT_EQ(t.hidden_size, 2048);
  EXPECT_EQ(t.num_key_value_heads, 4);
  EXPECT_EQ(t.head_dim, 64);  // hidden_size / heads
  EXPECT_EQ(t.rms_norm_eps, 1e-5);
  EXPECT_EQ(t.rope_scaling.type, RopeScaling::Type::none);
  EXPECT_EQ(t.torch_dtype, "bfloat16");
  EXPECT_FALSE(t.qkv_bias());
  EXPECT_EQ(t.extra.at("transformers_version"), "\"4.35.0\"");

  LlamaConfig l = parse(kLlama32);
  EXPECT_EQ(l.rope_theta, 500000.0);
  EXPECT_EQ(l.rope_scaling.type, RopeScaling::Type::llama3);
  EXPECT_EQ(l.rope_scaling.factor, 32.0);
  EXPECT_EQ(l.rope_scaling.low_freq_factor, 1.0);
  EXPECT_EQ(l.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(l.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_TRUE(l.tie_word_embeddings);
  EXPECT_EQ(l.eos_token_ids, (std::vector<int64_t>{128001, 128008, 128009}));

  LlamaConfig q = parse(kQwen2);
  EXPECT_EQ(q.model_type, "qwen2");
  EXPECT_TRUE(q.qkv_bias());
  EXPECT_FALSE(q.o_bias());
  EXPECT_EQ(q.head_dim, 64);
  EXPECT_EQ(q.eos_token_ids, std::vector<int64_t>{151643});

  LlamaConfig m = parse(kMistral03);
  EXPECT_EQ(m.model_type, "mistral");
  EXPECT_EQ(m.vocab_size, 32768);
  EXPECT_FALSE(m.qkv_bias());
}

TEST(LlamaConfig, AbsentKeysTakeEachArchitecturesDefaults) {
  LlamaConfig l = parse(R"({"architectures": ["LlamaForCausalLM"]})");
  EXPECT_EQ(l.vocab_size, 32000);
  EXPECT_EQ(l.hidden_size, 4096);
  EXPECT_EQ(l.intermediate_size, 11008);
  EXPECT_EQ(l.num_hidden_layers, 32);
  EXPECT_EQ(l.num_key_value_heads, 32);
  EXPECT_EQ(l.head_dim, 128);
  EXPECT_EQ(l.max_position_embeddings, 2048);
  EXPECT_EQ(l.rms_norm_eps, 1e-6);
  EXPECT_EQ(l.rope_theta, 10000);
  EXPECT_EQ(l.bos_token_id, 1);
  EXPECT_EQ(l.eos_token_ids, std::vector<int64_t>{2});
  EXPECT_FALSE(l.pad_token_id.has_value());
  EXPECT_FALSE(l.tie_word_embeddings);

  LlamaConfig m = parse(R"({"model_type": "mistral", "max_position_embeddings": 4096})");
  EXPECT_EQ(m.architecture, "MistralForCausalLM");
  EXPECT_EQ(m.num_key_value_heads, 8);
  EXPECT_EQ(m.intermediate_size, 14336);

  LlamaConfig q = parse(R"({"model_type": "qwen2"})");
  EXPECT_EQ(q.vocab_size, 151936);
  EXPECT_EQ(q.num_key_value_heads, 32);
  EXPECT_EQ(q.max_position_embeddings, 32768);
  EXPECT_FALSE(q.bos_token_id.has_value());
  EXPECT_TRUE(q.eos_token_ids.empty());

  // An explicit null means as many kv heads as query heads.
  LlamaConfig n = parse(R"({"model_type": "mistral", "num_key_value_heads": null,
                            "num_attention_heads": 4, "hidden_size": 64, "sliding_window": null})");
  EXPECT_EQ(n.num_key_value_heads, 4);
}

TEST(LlamaConfig, WritesItBackUnchanged) {
  for (const char* text : {kTinyLlama, kLlama32, kQwen2, kMistral03}) {
    LlamaConfig c = parse(text);
    std::string written = models::llama_config_json(c);
    // The same JSON, plus the keys zenith always writes (transformers' values for them).
    auto expected = nlohmann::json::parse(text);
    expected["head_dim"] = c.head_dim;
    if (!expected.contains("pad_token_id")) expected["pad_token_id"] = nullptr;
    if (!expected.contains("rope_scaling")) expected["rope_scaling"] = nullptr;
    if (c.model_type == "llama") expected["mlp_bias"] = false;
    EXPECT_EQ(nlohmann::json::parse(written), expected) << written;
    EXPECT_EQ(models::llama_config_json(parse(written)), written);
  }
  TempDir dir("llama_cfg");
  models::save_llama_config(dir.str(), parse(kLlama32));
  EXPECT_EQ(models::load_llama_config(dir.str()).rope_scaling.factor, 32.0);
  EXPECT_EQ(models::load_llama_config((dir.path() / "config.json").string()).vocab_size, 128256);
}

TEST(LlamaConfig, ReadsRopeScalingSpellings) {
  LlamaConfig lin =
      parse(patched(kTinyLlama, {{"rope_scaling", {{"type", "linear"}, {"factor", 4}}}}));
  EXPECT_EQ(lin.rope_scaling.type, RopeScaling::Type::linear);
  EXPECT_EQ(lin.rope_scaling.factor, 4.0);
  LlamaConfig def = parse(patched(kTinyLlama, {{"rope_scaling", {{"rope_type", "default"}}}}));
  EXPECT_EQ(def.rope_scaling.type, RopeScaling::Type::none);
  // transformers 5: rope_theta and the scaling inside rope_parameters; written back the same way.
  std::string v5 = patched(kLlama32, {{"rope_scaling", nullptr},
                                      {"rope_theta", nullptr},
                                      {"torch_dtype", nullptr},
                                      {"dtype", "bfloat16"},
                                      {"rope_parameters",
                                       {{"rope_type", "llama3"},
                                        {"rope_theta", 500000.0},
                                        {"factor", 32.0},
                                        {"low_freq_factor", 1.0},
                                        {"high_freq_factor", 4.0},
                                        {"original_max_position_embeddings", 8192}}}});
  LlamaConfig c = parse(v5);
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::llama3);
  EXPECT_EQ(c.torch_dtype, "bfloat16");
  auto back = nlohmann::json::parse(models::llama_config_json(c));
  EXPECT_EQ(back["rope_parameters"], nlohmann::json::parse(v5)["rope_parameters"]);
  EXPECT_EQ(back["dtype"], "bfloat16");
  EXPECT_FALSE(back.contains("rope_theta"));
}

TEST(LlamaConfig, ErrorsNameTheFileAndTheKey) {
  EXPECT_TRUE(throws_with(
      [&] {
        parse(patched(kTinyLlama, {{"architectures", {"GPT2LMHeadModel"}}}));
      },
      "config.json: key 'architectures' is [\"GPT2LMHeadModel\"], not a "
      "supported architecture; supported: LlamaForCausalLM (model_type "
      "llama), MistralForCausalLM (model_type mistral), Qwen2ForCausalLM"));
  EXPECT_TRUE(fails(kTinyLlama, {{"architectures", nullptr}, {"model_type", nullptr}},
                    "'architectures' is missing (and so is model_type); supported:"));
  EXPECT_TRUE(fails(kTinyLlama, {{"architectures", nullptr}, {"model_type", "gemma"}},
                    "'model_type' is 'gemma'"));
  EXPECT_TRUE(fails(kTinyLlama, {{"model_type", "qwen2"}}, "'model_type' is 'qwen2', but"));
  EXPECT_TRUE(fails(kTinyLlama, {{"hidden_size", "2048"}},
                    "'hidden_size' must be an integer, got \"2048\" (a string)"));
  EXPECT_TRUE(fails(kTinyLlama, {{"hidden_size", 2048.5}}, "'hidden_size' must be an integer"));
  EXPECT_TRUE(
      fails(kTinyLlama, {{"num_hidden_layers", 0}}, "'num_hidden_layers' must be positive"));
  EXPECT_TRUE(fails(kTinyLlama, {{"rms_norm_eps", "small"}}, "'rms_norm_eps' must be a number"));
  EXPECT_TRUE(fails(kTinyLlama, {{"tie_word_embeddings", 1}},
                    "'tie_word_embeddings' must be true or false"));
  EXPECT_TRUE(
      fails(kTinyLlama, {{"num_key_value_heads", 5}}, "'num_key_value_heads' (5) must divide"));
  EXPECT_TRUE(fails(kTinyLlama, {{"hidden_size", 2050}}, "'hidden_size' (2050) is not a multiple"));
  EXPECT_TRUE(fails(kTinyLlama, {{"head_dim", 63}}, "'head_dim' is 63: rotary"));
  EXPECT_TRUE(fails(kTinyLlama, {{"hidden_act", "gelu"}}, "'hidden_act' is 'gelu'"));
  EXPECT_TRUE(fails(kTinyLlama, {{"torch_dtype", "int8"}}, "'torch_dtype' is 'int8'"));
  EXPECT_TRUE(fails(kTinyLlama, {{"eos_token_id", {1, "2"}}},
                    "'eos_token_id' must be an integer or a list"));
  EXPECT_TRUE(fails(kTinyLlama, {{"rope_scaling", {{"rope_type", "dynamic"}, {"factor", 2.0}}}},
                    "'rope_scaling.rope_type' is 'dynamic', not supported; supported: default, "
                    "linear, llama3"));
  EXPECT_TRUE(fails(kTinyLlama, {{"rope_scaling", {{"type", "linear"}}}},
                    "'rope_scaling.factor' is missing"));
  EXPECT_TRUE(fails(kTinyLlama, {{"rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}}}},
                    "'rope_scaling.low_freq_factor' is missing"));
  EXPECT_TRUE(fails(kTinyLlama, {{"rope_scaling", "linear"}}, "'rope_scaling' must be an object"));
  EXPECT_TRUE(throws_with([&] { parse("{\"hidden_size\": 1"); }, "config.json: invalid JSON"));
  EXPECT_TRUE(throws_with([&] { models::load_llama_config("/nonexistent/dir/config.json"); },
                          "/nonexistent/dir/config.json: cannot open"));
}

TEST(LlamaConfig, RejectsSlidingWindowsThatApply) {
  // Mistral 7B v0.1: a 4096-token window under a 32768-token context.
  EXPECT_TRUE(fails(kMistral03, {{"sliding_window", 4096}},
                    "'sliding_window' is 4096, below max_position_embeddings (32768): "
                    "sliding-window attention is not supported"));
  EXPECT_TRUE(fails(kMistral03, {{"sliding_window", nullptr}},  // removed: MistralConfig's 4096
                    "'sliding_window' is absent, so 4096"));
  parse(patched(kMistral03, {{"sliding_window", 32768}}));  // never applies
  parse(patched(kMistral03, {{"sliding_window", nullptr}, {"max_position_embeddings", 4096}}));
  EXPECT_TRUE(fails(
      kQwen2, {{"use_sliding_window", true}, {"sliding_window", 4096}, {"max_window_layers", 12}},
      "'sliding_window' is 4096"));
  // Qwen2 windows only layers from max_window_layers on.
  parse(patched(
      kQwen2, {{"use_sliding_window", true}, {"sliding_window", 4096}, {"max_window_layers", 24}}));
}

LlamaConfig small(const std::string& model_type, bool tie) {
  return parse(nlohmann::json({{"model_type", model_type},
                               {"hidden_size", 16},
                               {"intermediate_size", 24},
                               {"num_hidden_layers", 2},
                               {"num_attention_heads", 4},
                               {"num_key_value_heads", 2},
                               {"vocab_size", 10},
                               {"max_position_embeddings", 32},
                               {"tie_word_embeddings", tie}})
                   .dump());
}

std::map<std::string, Tensor> state_for(const LlamaConfig& c) {
  std::map<std::string, Tensor> s;
  for (const auto& p : models::expected_llama_parameters(c))
    s[p.name] = Tensor::zeros(p.shape, DType::bf16);
  return s;
}

TEST(LlamaParameters, HfNamesAndShapesInModelOrder) {
  auto p = models::expected_llama_parameters(small("llama", false));
  ASSERT_EQ(p.size(), 1u + 2 * 9 + 2);
  EXPECT_EQ(p[0].name, "model.embed_tokens.weight");
  EXPECT_EQ(p[0].shape, (Shape{10, 16}));
  EXPECT_EQ(p[1].name, "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(p[1].shape, (Shape{16, 16}));
  EXPECT_EQ(p[2].name, "model.layers.0.self_attn.k_proj.weight");
  EXPECT_EQ(p[2].shape, (Shape{8, 16}));  // 2 kv heads of 4
  EXPECT_EQ(p[4].name, "model.layers.0.self_attn.o_proj.weight");
  EXPECT_EQ(p[5].name, "model.layers.0.mlp.gate_proj.weight");
  EXPECT_EQ(p[5].shape, (Shape{24, 16}));
  EXPECT_EQ(p[7].name, "model.layers.0.mlp.down_proj.weight");
  EXPECT_EQ(p[7].shape, (Shape{16, 24}));
  EXPECT_EQ(p[8].name, "model.layers.0.input_layernorm.weight");
  EXPECT_EQ(p[9].name, "model.layers.0.post_attention_layernorm.weight");
  EXPECT_EQ(p[19].name, "model.norm.weight");
  EXPECT_EQ(p[20].name, "lm_head.weight");
  EXPECT_EQ(p[20].shape, (Shape{10, 16}));

  EXPECT_EQ(models::expected_llama_parameters(small("llama", true)).back().name,
            "model.norm.weight");  // tied: no lm_head
  auto q = models::expected_llama_parameters(small("qwen2", true));
  EXPECT_EQ(q[2].name, "model.layers.0.self_attn.q_proj.bias");
  EXPECT_EQ(q[2].shape, (Shape{16}));
  EXPECT_EQ(q[4].name, "model.layers.0.self_attn.k_proj.bias");
  EXPECT_EQ(q[6].name, "model.layers.0.self_attn.v_proj.bias");
  EXPECT_EQ(q[7].name, "model.layers.0.self_attn.o_proj.weight");
  EXPECT_EQ(q[8].name, "model.layers.0.mlp.gate_proj.weight");  // no o_proj bias
  LlamaConfig biased = small("llama", true);
  biased.attention_bias = biased.mlp_bias = true;
  EXPECT_EQ(models::expected_llama_parameters(biased).size(), 1u + 2 * (9 + 7) + 1);
}

TEST(LlamaState, ChecksNameTheTensorAndBothShapes) {
  LlamaConfig c = small("llama", false);
  auto good = state_for(c);
  models::check_llama_state(c, good, "dir");

  auto s = good;
  s["model.layers.1.self_attn.k_proj.weight"] = Tensor::zeros({16, 16});
  EXPECT_TRUE(throws_with([&] { models::check_llama_state(c, s, "dir"); },
                          "tensor 'model.layers.1.self_attn.k_proj.weight' has shape [16, 16], "
                          "config.json gives [8, 16]"));
  s = good;
  s.erase("lm_head.weight");
  EXPECT_TRUE(throws_with([&] { models::check_llama_state(c, s, "dir"); },
                          "[llama] dir: the weights do not fit config.json"));
  EXPECT_TRUE(throws_with([&] { models::check_llama_state(c, s, "dir"); },
                          "missing tensor 'lm_head.weight' [10, 16]"));
  s = good;
  s["model.layers.2.mlp.up_proj.weight"] = Tensor::zeros({24, 16});
  s["model.layers.0.input_layernorm.weight"] = Tensor::zeros({16}, DType::i64);
  EXPECT_TRUE(throws_with([&] { models::check_llama_state(c, s, "dir"); },
                          "unexpected tensor 'model.layers.2.mlp.up_proj.weight'"));
  EXPECT_TRUE(throws_with([&] { models::check_llama_state(c, s, "dir"); },
                          "is int64; weights are floating point"));
  EXPECT_TRUE(throws_with([&] { models::check_llama_state(c, s, "dir"); }, "2 problems"));

  // Tolerated as transformers tolerates them.
  LlamaConfig tied = small("llama", true);
  s = state_for(tied);
  s["lm_head.weight"] = Tensor::zeros({10, 16});
  s["model.layers.0.self_attn.rotary_emb.inv_freq"] = Tensor::zeros({2});
  models::check_llama_state(tied, s, "dir");

  // A listing names the file a tensor is in.
  std::vector<io::TensorInfo> infos = {
      {"model.norm.weight", DType::f32, {15}, "dir/x.safetensors"}};
  EXPECT_TRUE(throws_with([&] { models::check_llama_state(c, infos, "dir"); },
                          "tensor 'model.norm.weight' in dir/x.safetensors has shape [15]"));
}

TEST(LlamaState, AdapterForAnotherBaseNamesTheTensorAndBothShapes) {
  LlamaConfig c = small("llama", false);
  EXPECT_EQ(models::llama_linear_shape(c, "model.layers.1.self_attn.v_proj"), (Shape{8, 16}));
  EXPECT_EQ(models::llama_linear_shape(c, "model.layers.0.mlp.down_proj"), (Shape{16, 24}));
  EXPECT_EQ(models::llama_linear_shape(c, "lm_head"), (Shape{10, 16}));
  EXPECT_TRUE(throws_with([&] { models::llama_linear_shape(c, "model.layers.2.mlp.up_proj"); },
                          "has no linear layer 'model.layers.2.mlp.up_proj'"));

  io::LoraAdapter a;
  a.config.r = 2;
  a.config.target_modules = {"q_proj", "k_proj"};
  a.modules["model.layers.0.self_attn.q_proj"] = {Tensor::zeros({2, 16}), Tensor::zeros({16, 2})};
  models::check_lora_adapter(c, a, "adapter");
  a.modules["model.layers.1.self_attn.k_proj"] = {Tensor::zeros({2, 32}), Tensor::zeros({16, 2})};
  EXPECT_TRUE(throws_with([&] { models::check_lora_adapter(c, a, "adapter"); },
                          "tensor 'base_model.model.model.layers.1.self_attn.k_proj.lora_A.weight' "
                          "has shape [2, 32]; the base model's model.layers.1.self_attn.k_proj "
                          "takes 16 inputs, so lora_A must be [2, 16]"));
  EXPECT_TRUE(
      throws_with([&] { models::check_lora_adapter(c, a, "adapter"); },
                  "lora_B.weight' has shape [16, 2]; the base model's "
                  "model.layers.1.self_attn.k_proj has 8 outputs, so lora_B must be [8, 2]"));
  a.modules.erase("model.layers.1.self_attn.k_proj");
  a.modules["model.layers.7.self_attn.q_proj"] = {Tensor::zeros({2, 16}), Tensor::zeros({16, 2})};
  EXPECT_TRUE(
      throws_with([&] { models::check_lora_adapter(c, a, "adapter"); },
                  "adapts model.layers.7.self_attn.q_proj, which the base model does not have"));
}

}  // namespace
