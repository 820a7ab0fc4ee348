// PEFT LoRA adapter files: adapter_config.json as PEFT writes and reads it, PEFT's module
// matching, adapter_model.safetensors names and shapes, round trips, and clear errors.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/files.h"
#include "support/op_check.h"
#include "support/temp_dir.h"
#include "support/tensor_bits.h"
#include "zenith/hf.h"

namespace fs = std::filesystem;
using zenith::DType;
using zenith::Tensor;
using zenith::testing::read_json;
using zenith::testing::same_bits;
using zenith::testing::TempDir;
using zenith::testing::throws_with;
using zenith::testing::write_bytes;
namespace io = zenith::io;

namespace {

// What PEFT 0.10's LoraConfig.save_pretrained writes for a TinyLlama q/v adapter.
const char* kPeftWritten = R"({
  "alpha_pattern": {},
  "auto_mapping": null,
  "base_model_name_or_path": "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
  "bias": "none",
  "fan_in_fan_out": false,
  "inference_mode": true,
  "init_lora_weights": true,
  "layer_replication": null,
  "layers_pattern": null,
  "layers_to_transform": null,
  "loftq_config": {},
  "lora_alpha": 16,
  "lora_dropout": 0.05,
  "megatron_config": null,
  "megatron_core": "megatron.core",
  "modules_to_save": null,
  "peft_type": "LORA",
  "r": 8,
  "rank_pattern": {},
  "revision": null,
  "target_modules": ["v_proj", "q_proj"],
  "task_type": "CAUSAL_LM",
  "use_dora": false,
  "use_rslora": false
})";

TEST(LoraConfig, ReadsWhatPeftWritesAndWritesItBack) {
  TempDir dir("peft_cfg");
  write_bytes(dir.path() / "adapter_config.json", kPeftWritten);
  io::LoraConfig c = io::read_lora_config(dir.str());  // a directory or the file
  EXPECT_EQ(c.r, 8);
  EXPECT_EQ(c.lora_alpha, 16);
  EXPECT_DOUBLE_EQ(c.lora_dropout, 0.05);
  EXPECT_EQ(c.target_modules, (std::vector<std::string>{"v_proj", "q_proj"}));
  EXPECT_EQ(c.base_model_name_or_path, "TinyLlama/TinyLlama-1.1B-Chat-v1.0");
  EXPECT_EQ(c.task_type, "CAUSAL_LM");
  EXPECT_TRUE(c.inference_mode);
  EXPECT_FALSE(c.revision.has_value());
  EXPECT_DOUBLE_EQ(c.scaling(), 2.0);
  // Written back it is the same JSON, uninterpreted keys included.
  fs::path out = dir.path() / "out.json";
  io::write_lora_config(out.string(), c);
  EXPECT_EQ(read_json(out), nlohmann::json::parse(kPeftWritten));
}

TEST(LoraConfig, WritesPeftsFieldsForANewAdapter) {
  io::LoraConfig c;
  c.r = 4;
  c.lora_alpha = 8;
  c.target_modules = {"q_proj", "k_proj", "v_proj", "o_proj"};
  c.base_model_name_or_path = "base";
  auto j = nlohmann::json::parse(io::lora_config_json(c));
  EXPECT_EQ(j["peft_type"], "LORA");
  EXPECT_EQ(j["r"], 4);
  EXPECT_TRUE(j["lora_alpha"].is_number_integer());  // PEFT types lora_alpha as int
  EXPECT_EQ(j["target_modules"], nlohmann::json({"q_proj", "k_proj", "v_proj", "o_proj"}));
  EXPECT_EQ(j["task_type"], "CAUSAL_LM");
  EXPECT_EQ(j["bias"], "none");
  EXPECT_EQ(j["fan_in_fan_out"], false);
  EXPECT_EQ(j["use_rslora"], false);
  EXPECT_EQ(j["init_lora_weights"], true);
  EXPECT_EQ(j["inference_mode"], true);
  for (const char* null_key :
       {"layers_to_transform", "layers_pattern", "modules_to_save", "revision", "auto_mapping"})
    EXPECT_TRUE(j[null_key].is_null()) << null_key;
  EXPECT_EQ(j["rank_pattern"], nlohmann::json::object());
  EXPECT_EQ(j["alpha_pattern"], nlohmann::json::object());
  c.lora_alpha = 2.5;
  EXPECT_EQ(nlohmann::json::parse(io::lora_config_json(c))["lora_alpha"], 2.5);
}

TEST(LoraConfig, ScalingIsAlphaOverROrOverSqrtRWithRsLora) {
  io::LoraConfig c;
  c.r = 16;
  c.lora_alpha = 32;
  EXPECT_DOUBLE_EQ(c.scaling(), 2.0);
  c.use_rslora = true;
  EXPECT_DOUBLE_EQ(c.scaling(), 8.0);
}

TEST(LoraConfig, TargetsModulesAsPeftMatchesThem) {
  io::LoraConfig c;
  c.target_modules = {"q_proj", "mlp.up_proj"};
  EXPECT_TRUE(c.targets("model.layers.0.self_attn.q_proj"));
  EXPECT_TRUE(c.targets("model.layers.3.mlp.up_proj"));
  EXPECT_FALSE(c.targets("model.layers.0.self_attn.k_proj"));
  EXPECT_FALSE(c.targets("model.layers.0.self_attn.xq_proj"));  // a whole name after the dot
  c.layers_to_transform = {1, 3};
  EXPECT_FALSE(c.targets("model.layers.0.self_attn.q_proj"));
  EXPECT_TRUE(c.targets("model.layers.3.self_attn.q_proj"));

  io::LoraConfig all;
  all.all_linear = true;
  EXPECT_TRUE(all.targets("model.layers.0.mlp.down_proj"));
  EXPECT_FALSE(all.targets("lm_head"));  // PEFT's all-linear leaves the output layer alone

  io::LoraConfig re;
  re.target_regex = R"(.*\.(q|v)_proj)";
  EXPECT_TRUE(re.targets("model.layers.1.self_attn.v_proj"));
  EXPECT_FALSE(re.targets("model.layers.1.self_attn.o_proj"));
}

io::LoraAdapter small_adapter(DType dtype) {
  io::LoraAdapter a;
  a.config.r = 2;
  a.config.lora_alpha = 4;
  a.config.target_modules = {"q_proj", "down_proj"};
  a.modules["model.layers.0.self_attn.q_proj"] = {Tensor::randn({2, 8}).to(dtype),
                                                  Tensor::randn({8, 2}).to(dtype)};
  a.modules["model.layers.1.mlp.down_proj"] = {Tensor::randn({2, 12}).to(dtype),
                                               Tensor::randn({8, 2}).to(dtype)};
  return a;
}

TEST(LoraAdapter, RoundTripsWithPeftsTensorNames) {
  for (DType dtype : {DType::f32, DType::bf16}) {
    TempDir dir("peft_rt");
    io::LoraAdapter a = small_adapter(dtype);
    io::save_lora_adapter(dir.str(), a);
    auto tensors = io::load_safetensors((dir.path() / "adapter_model.safetensors").string());
    EXPECT_EQ(io::read_safetensors_metadata((dir.path() / "adapter_model.safetensors").string())
                  .at("format"),
              "pt");
    std::vector<std::string> names;
    for (const auto& [n, t] : tensors) names.push_back(n);
    EXPECT_EQ(names, (std::vector<std::string>{
                         "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight",
                         "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight",
                         "base_model.model.model.layers.1.mlp.down_proj.lora_A.weight",
                         "base_model.model.model.layers.1.mlp.down_proj.lora_B.weight"}));
    io::LoraAdapter b = io::load_lora_adapter(dir.str());
    EXPECT_EQ(b.config.r, 2);
    ASSERT_EQ(b.modules.size(), 2u);
    for (const auto& [module, w] : a.modules) {
      EXPECT_TRUE(same_bits(b.modules.at(module).A, w.A)) << module;
      EXPECT_TRUE(same_bits(b.modules.at(module).B, w.B)) << module;
    }
  }
}

TEST(LoraAdapter, ReadsNamesThatKeptTheAdapterName) {
  TempDir dir("peft_default");
  write_bytes(dir.path() / "adapter_config.json", kPeftWritten);
  io::save_safetensors((dir.path() / "adapter_model.safetensors").string(),
                       {{"base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight",
                         Tensor::randn({8, 16})},
                        {"base_model.model.model.layers.0.self_attn.q_proj.lora_B.default.weight",
                         Tensor::randn({16, 8})}});
  auto a = io::load_lora_adapter(dir.str());
  EXPECT_EQ(a.modules.count("model.layers.0.self_attn.q_proj"), 1u);
}

class LoraErrors : public ::testing::Test {
 protected:
  // adapter_config.json = PEFT's file with `change` merged in.
  std::string config_with(const nlohmann::json& change) {
    auto j = nlohmann::json::parse(kPeftWritten);
    j.merge_patch(change);
    write_bytes(dir_.path() / "adapter_config.json", j.dump());
    return (dir_.path() / "adapter_config.json").string();
  }
  void write_weights(const std::map<std::string, Tensor>& t) {
    config_with(nlohmann::json::object());
    io::save_safetensors((dir_.path() / "adapter_model.safetensors").string(), t);
  }
  bool config_fails(const nlohmann::json& change, const std::string& needle) {
    std::string path = config_with(change);
    return throws_with([&] { io::read_lora_config(path); }, path + ": key " + needle);
  }
  TempDir dir_{"peft_err"};
};

TEST_F(LoraErrors, ConfigKeysNameTheFileAndTheKey) {
  EXPECT_TRUE(config_fails({{"peft_type", "PREFIX_TUNING"}}, "'peft_type' is 'PREFIX_TUNING'"));
  EXPECT_TRUE(config_fails({{"r", "8"}}, "'r' must be an integer, got \"8\" (a string)"));
  EXPECT_TRUE(config_fails({{"r", 0}}, "'r' must be positive"));
  EXPECT_TRUE(config_fails({{"lora_alpha", true}}, "'lora_alpha' must be a number"));
  EXPECT_TRUE(config_fails({{"fan_in_fan_out", true}}, "'fan_in_fan_out' is true"));
  EXPECT_TRUE(config_fails({{"bias", "all"}}, "'bias' is 'all': only \"none\""));
  EXPECT_TRUE(config_fails({{"use_dora", true}}, "'use_dora' is true: not supported"));
  EXPECT_TRUE(config_fails({{"rank_pattern", {{"q_proj", 4}}}}, "'rank_pattern'"));
  EXPECT_TRUE(config_fails({{"modules_to_save", {"lm_head"}}}, "'modules_to_save'"));
  EXPECT_TRUE(config_fails({{"target_modules", nullptr}}, "'target_modules' is missing"));
  EXPECT_TRUE(config_fails({{"target_modules", 3}}, "'target_modules' must be a list"));
  EXPECT_TRUE(config_fails({{"target_modules", "(q_proj"}},
                           "'target_modules' is not a valid regular expression"));
  EXPECT_TRUE(config_fails({{"task_type", "SEQ_CLS"}}, "'task_type' is 'SEQ_CLS'"));
  EXPECT_TRUE(config_fails({{"init_lora_weights", "pissa"}}, "'init_lora_weights' is 'pissa'"));
  write_bytes(dir_.path() / "adapter_config.json", "[1, 2]");
  EXPECT_TRUE(throws_with([&] { io::read_lora_config(dir_.str()); }, "expected a JSON object"));
}

TEST_F(LoraErrors, WeightsNameTheTensor) {
  const std::string q = "base_model.model.model.layers.0.self_attn.q_proj.";
  write_weights({{q + "lora_A.weight", Tensor::randn({4, 16})},
                 {q + "lora_B.weight", Tensor::randn({16, 4})}});
  EXPECT_TRUE(throws_with([&] { io::load_lora_adapter(dir_.str()); },
                          "tensor '" + q +
                              "lora_A.weight' has shape [4, 16]: rank 4, but "
                              "adapter_config.json says r = 8"));
  write_weights({{q + "lora_A.weight", Tensor::randn({8, 16})}});
  EXPECT_TRUE(throws_with([&] { io::load_lora_adapter(dir_.str()); }, "has lora_A but no lora_B"));
  const std::string k = "base_model.model.model.layers.0.self_attn.k_proj.";
  write_weights({{k + "lora_A.weight", Tensor::randn({8, 16})},
                 {k + "lora_B.weight", Tensor::randn({16, 8})}});
  EXPECT_TRUE(throws_with([&] { io::load_lora_adapter(dir_.str()); },
                          "adapts model.layers.0.self_attn.k_proj, which adapter_config.json "
                          "does not target"));
  write_weights({{"model.layers.0.self_attn.q_proj.weight", Tensor::randn({8, 16})}});
  EXPECT_TRUE(throws_with([&] { io::load_lora_adapter(dir_.str()); },
                          "does not start with 'base_model.model.'"));
  write_weights({{"base_model.model.model.embed_tokens.lora_embedding_A", Tensor::randn({8, 16})}});
  EXPECT_TRUE(throws_with([&] { io::load_lora_adapter(dir_.str()); }, "embedding LoRA"));
  write_weights({{q + "lora_B.bias", Tensor::randn({16})}});
  EXPECT_TRUE(throws_with([&] { io::load_lora_adapter(dir_.str()); }, "is not a LoRA weight"));
  fs::remove(dir_.path() / "adapter_model.safetensors");
  EXPECT_TRUE(
      throws_with([&] { io::load_lora_adapter(dir_.str()); }, "no adapter_model.safetensors"));
}

TEST_F(LoraErrors, SavingChecksShapesAndTargets) {
  io::LoraAdapter a = small_adapter(DType::f32);
  a.modules["model.layers.0.self_attn.q_proj"].B = Tensor::randn({8, 3});
  EXPECT_TRUE(throws_with([&] { io::save_lora_adapter(dir_.str(), a); },
                          "model.layers.0.self_attn.q_proj needs lora_A [r, in]"));
  a = small_adapter(DType::f32);
  a.modules["model.layers.0.self_attn.k_proj"] = a.modules["model.layers.0.self_attn.q_proj"];
  EXPECT_TRUE(throws_with([&] { io::save_lora_adapter(dir_.str(), a); }, "is not targeted"));
}

}  // namespace
