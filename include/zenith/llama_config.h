// The LLaMA family's Hugging Face `config.json` (LLaMA 1/2/3.x, TinyLlama, SmolLM, Mistral
// without a sliding window, Qwen2), the parameters such a model has under HF's names, and checks
// of weight files and PEFT adapters against it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "zenith/hf.h"
#include "zenith/tensor.h"

namespace zenith::models {

// rope_scaling / rope_parameters: none, linear (positions / factor) or llama3 (per-frequency
// interpolation between low_freq_factor and high_freq_factor wavelengths).
struct RopeScaling {
  enum class Type { none, linear, llama3 };
  Type type = Type::none;
  double factor = 1;
  double low_freq_factor = 1;
  double high_freq_factor = 4;
  int64_t original_max_position_embeddings = 8192;
};

struct LlamaConfig {
  std::string architecture = "LlamaForCausalLM";  // architectures[0]
  std::string model_type = "llama";               // llama, mistral or qwen2
  int64_t vocab_size = 32000;
  int64_t hidden_size = 4096;
  int64_t intermediate_size = 11008;
  int64_t num_hidden_layers = 32;
  int64_t num_attention_heads = 32;
  int64_t num_key_value_heads = 32;
  int64_t head_dim = 128;
  int64_t max_position_embeddings = 2048;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // LLaMA: biases on q, k, v and o
  bool mlp_bias = false;        // LLaMA: biases on gate, up and down
  std::string hidden_act = "silu";
  std::string torch_dtype;  // "float32", "bfloat16", "float16"; empty: unset
  std::optional<int64_t> bos_token_id = 1;
  std::vector<int64_t> eos_token_ids = {2};  // eos_token_id: one id or a list
  std::optional<int64_t> pad_token_id;
  // Keys not interpreted (initializer_range, transformers_version, ...) as JSON text, written
  // back unchanged; and whether the file used transformers 5's keys ("rope_parameters" holding
  // rope_theta and the scaling, "dtype" for torch_dtype), which are then written back.
  std::map<std::string, std::string> extra;
  bool transformers_v5_keys = false;

  // Which projections carry a bias: Qwen2 has them on q, k and v only.
  bool qkv_bias() const { return model_type == "qwen2" || attention_bias; }
  bool o_bias() const { return model_type != "qwen2" && attention_bias; }
  int64_t q_dim() const { return num_attention_heads * head_dim; }
  int64_t kv_dim() const { return num_key_value_heads * head_dim; }
};

// The architectures config.json may name, and the matching model_type values.
std::vector<std::string> supported_llama_architectures();

// Parses config.json text; `source` names the file in errors. Absent keys take the defaults of
// the architecture's transformers config class. Errors name the file and the key: an unknown
// architecture (listing the supported ones), a wrong JSON type, a value out of range, an
// unsupported rope_scaling (listing the supported ones) or hidden_act, a sliding window.
LlamaConfig parse_llama_config(const std::string& json_text, const std::string& source);
// From a model directory or a config.json path.
LlamaConfig load_llama_config(const std::string& path);
// config.json text (sorted keys, 2-space indent, as save_pretrained writes); round-trips
// parse_llama_config, keeping uninterpreted keys.
std::string llama_config_json(const LlamaConfig& config);
// Writes config.json atomically into a directory (or to a .json path).
void save_llama_config(const std::string& path, const LlamaConfig& config);

// Every parameter of the model with HF's name and shape, in model order: model.embed_tokens,
// per layer self_attn.{q,k,v,o}_proj (+ biases), mlp.{gate,up,down}_proj (+ biases),
// input_layernorm, post_attention_layernorm, then model.norm and lm_head (unless tied).
struct ParameterSpec {
  std::string name;
  Shape shape;
};
std::vector<ParameterSpec> expected_llama_parameters(const LlamaConfig& config);

// Checks a state (loaded tensors, or a listing from io::list_hf_state) against the config and
// throws one error listing every problem, each naming the tensor (and its file when listed):
// a shape the config does not give (both shapes), a missing tensor, an unexpected one.
// `source` names the directory or file. Tolerated, as transformers does: lm_head.weight in a
// tied model, and the rotary_emb.inv_freq buffers old checkpoints carry.
void check_llama_state(const LlamaConfig& config, const std::map<std::string, Tensor>& tensors,
                       const std::string& source);
void check_llama_state(const LlamaConfig& config, const std::vector<io::TensorInfo>& tensors,
                       const std::string& source);

// {out, in} of the linear layer at `module_path` ("model.layers.0.self_attn.q_proj", "lm_head");
// throws naming the path if the model has no such layer.
Shape llama_linear_shape(const LlamaConfig& config, const std::string& module_path);
// Checks each adapted module exists in the model and its lora_A [r, in] / lora_B [out, r] fit
// the layer; an adapter made for another base fails naming the tensor and both shapes.
void check_lora_adapter(const LlamaConfig& config, const io::LoraAdapter& adapter,
                        const std::string& source);

}  // namespace zenith::models
