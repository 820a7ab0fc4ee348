// Hugging Face files: model directories (`save_pretrained`'s weights layout) and PEFT LoRA
// adapter directories. What zenith writes here opens in transformers and PEFT unchanged.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "zenith/io.h"
#include "zenith/lora.h"
#include "zenith/tensor.h"

namespace zenith::io {

// ---- model weights: `model.safetensors`, or shards `model-00001-of-0000M.safetensors` and
// `model.safetensors.index.json` ({"metadata": {"total_size": bytes}, "weight_map": {tensor:
// file}}). Like transformers, a directory holding both reads `model.safetensors`.
inline constexpr const char* kHfWeightsFile = "model.safetensors";
inline constexpr const char* kHfIndexFile = "model.safetensors.index.json";
inline constexpr uint64_t kHfDefaultMaxShardBytes = 5'000'000'000;  // transformers' "5GB"

// Every tensor of the directory, sorted by name, from the headers alone. Errors name the file and
// what is wrong: no weights, a shard the index names that is missing, a tensor the index maps to
// a shard that lacks it, a tensor in two shards, truncated or corrupt files.
std::vector<TensorInfo> list_hf_state(const std::string& dir);
// The tensors in their storage dtypes (F32, BF16, F16, ...), each read once into its storage.
std::map<std::string, Tensor> load_hf_state(const std::string& dir);
// Writes the weights as save_pretrained does: `model.safetensors` when they fit in
// `max_shard_bytes`, else shards filled in natural name order (layer 2 before layer 10) and the
// index; safetensors metadata {"format": "pt"}. Every file is written to a temporary name,
// fsynced and renamed, the index last; weight files of an earlier save that the new one does not
// use are removed after it, so a crash leaves the old weights or the new ones, never an index
// naming a missing shard.
void save_hf_state(const std::string& dir, const std::map<std::string, Tensor>& tensors,
                   uint64_t max_shard_bytes = kHfDefaultMaxShardBytes);

// ---- PEFT LoRA adapters: `adapter_config.json` + `adapter_model.safetensors` holding, per
// adapted linear layer, `base_model.model.<module>.lora_A.weight` [r, in] and `.lora_B.weight`
// [out, r]; the layer computes W x + scaling * B A x.
inline constexpr const char* kAdapterConfigFile = "adapter_config.json";
inline constexpr const char* kAdapterWeightsFile = "adapter_model.safetensors";

// nn::LoraSettings (r, lora_alpha, lora_dropout, use_rslora, target_modules, all_linear) and the
// rest of PEFT's keys.
struct LoraConfig : nn::LoraSettings {
  std::string target_regex;     // instead of target_modules: PEFT's string form, matched whole
  std::string bias = "none";    // only "none" is supported
  bool fan_in_fan_out = false;  // must be false: LLaMA's layers are nn.Linear [out, in]
  std::string task_type = "CAUSAL_LM";
  std::string base_model_name_or_path;
  std::optional<std::string> revision;
  bool inference_mode = true;
  std::vector<int64_t> layers_to_transform;  // empty: every layer
  // Keys zenith does not interpret, as JSON text, written back unchanged.
  std::map<std::string, std::string> extra;

  // Whether the adapter targets the linear layer at `module_path` ("model.layers.3.mlp.up_proj").
  // "all-linear" targets every linear layer but the output layer `lm_head`.
  bool targets(const std::string& module_path) const;
};

// Reads `adapter_config.json` (a directory or the file). Errors name the file and the key: wrong
// peft_type, wrong JSON types, unsupported features (bias, fan_in_fan_out, DoRA, rank or alpha
// patterns).
LoraConfig read_lora_config(const std::string& path);
// The JSON PEFT writes (sorted keys, PEFT's default fields), so PeftConfig.from_pretrained reads
// it.
std::string lora_config_json(const LoraConfig& config);
void write_lora_config(const std::string& path, const LoraConfig& config);

struct LoraWeights {
  Tensor A;  // [r, in]
  Tensor B;  // [out, r]
};
struct LoraAdapter {
  LoraConfig config;
  std::map<std::string, LoraWeights>
      modules;  // by module path, e.g. "model.layers.0.self_attn.q_proj"
};
// The adapter directory's config and weights (in their storage dtype). Every tensor must be a
// lora_A/lora_B pair of a module the config targets, with ranks equal to r.
LoraAdapter load_lora_adapter(const std::string& dir);
// Writes adapter_config.json and adapter_model.safetensors (metadata {"format": "pt"}).
void save_lora_adapter(const std::string& dir, const LoraAdapter& adapter);

}  // namespace zenith::io
