// PEFT LoRA adapters as GGUF adapter files (include/zenith/gguf.h), for llama.cpp's --lora and
// node-llama-cpp's createContext({lora}).
#include <cmath>

#include "models/llama_gguf.h"
#include "zenith/autograd.h"
#include "zenith/error.h"
#include "zenith/gguf.h"

namespace zenith::models {

int64_t save_gguf_adapter(const io::LoraAdapter& adapter, const LlamaConfig& base,
                          const std::string& path) {
  check_lora_adapter(base, adapter, path);
  ZENITH_CHECK(!adapter.modules.empty(), "[gguf] the adapter has no LoRA weights");
  const io::LoraConfig& cfg = adapter.config;
  namespace gguf = io::gguf;
  std::vector<std::pair<std::string, gguf::Value>> kv = {
      {"general.architecture", gguf::Value::str("llama")},
      {"general.type", gguf::Value::str("adapter")},
      {"adapter.type", gguf::Value::str("lora")},
      // llama.cpp scales by alpha / r; this alpha gives PEFT's scaling (rsLoRA included).
      {"adapter.lora.alpha", gguf::Value::f32(cfg.scaling() * double(cfg.r))},
  };
  std::vector<gguf::OutTensor> tensors;
  NoGradGuard no_grad;
  // In model order (expected_llama_parameters), as the converter writes them.
  for (const ParameterSpec& spec : expected_llama_parameters(base)) {
    const std::string module = spec.name.substr(0, spec.name.rfind('.'));
    auto it = adapter.modules.find(module);
    if (it == adapter.modules.end() || spec.name != module + ".weight") continue;
    const std::string name = detail::gguf_tensor_name(spec.name);
    ZENITH_CHECK(!name.empty(), "[gguf] ", module,
                 " has no GGUF name in llama.cpp's llama "
                 "architecture");
    Tensor a = it->second.A.to(DType::f32).contiguous();
    Tensor b = it->second.B.to(DType::f32).contiguous();
    const bool is_q = module.ends_with("q_proj"), is_k = module.ends_with("k_proj");
    if (is_q || is_k)
      b = detail::permute_rotary_rows(b, is_q ? base.num_attention_heads : base.num_key_value_heads,
                                      true);
    tensors.push_back({name + ".lora_a", {a.size(1), a.size(0)}, gguf::TensorType::f32, a});
    tensors.push_back({name + ".lora_b", {b.size(1), b.size(0)}, gguf::TensorType::f32, b});
  }
  gguf::write_file(path, kv, tensors);
  return int64_t(tensors.size());
}

}  // namespace zenith::models
