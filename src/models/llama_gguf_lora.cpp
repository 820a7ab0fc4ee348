// PEFT LoRA adapters as GGUF adapter files (include/zenith/gguf.h), for llama.cpp's --lora and
// node-llama-cpp's createContext({lora}), and read back for --adapter X.gguf.
#include <cmath>
#include <map>
#include <set>

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

io::LoraAdapter load_gguf_adapter(const std::string& path, const LlamaConfig& base) {
  namespace gguf = io::gguf;
  const gguf::File f = gguf::read_file(path);
  const std::string type = f.get_string("general.type", "model");
  ZENITH_CHECK(type == "adapter", "[gguf] ", path, ": general.type is '", type,
               "', not a LoRA adapter (a GGUF model goes with --model; an adapter file has "
               "general.type 'adapter' and adapter.type 'lora')");
  const std::string adapter_type = f.get_string("adapter.type");
  ZENITH_CHECK(adapter_type == "lora", "[gguf] ", path, ": adapter.type is '", adapter_type,
               "'; zenith reads LoRA adapters ('lora')");
  const std::string arch = f.get_string("general.architecture");
  ZENITH_CHECK(arch == "llama", "[gguf] ", path, ": general.architecture is '", arch,
               "'; zenith reads adapters of the llama architecture only");
  // Each GGUF name back to its HF module and that module's weight [out, in].
  std::map<std::string, std::pair<std::string, Shape>> module_of;
  for (const ParameterSpec& spec : expected_llama_parameters(base))
    if (const std::string name = detail::gguf_tensor_name(spec.name); !name.empty())
      module_of[name] = {spec.name.substr(0, spec.name.rfind('.')), spec.shape};
  io::LoraAdapter adapter;
  std::set<std::string> short_names;
  for (const gguf::TensorEntry& e : f.tensors) {
    const bool is_a = e.name.ends_with(".lora_a");
    ZENITH_CHECK(is_a || e.name.ends_with(".lora_b"), "[gguf] ", path, ": tensor '", e.name,
                 "' is not a LoRA weight (<tensor>.lora_a or <tensor>.lora_b)");
    const std::string target = e.name.substr(0, e.name.size() - 7);
    auto it = module_of.find(target);
    ZENITH_CHECK(it != module_of.end() && it->first.ends_with(".weight"), "[gguf] ", path,
                 ": tensor '", e.name, "' adapts ", target, ", which the base model (",
                 base.num_hidden_layers, " layers) does not have");
    ZENITH_CHECK(e.ne.size() == 2, "[gguf] ", path, ": tensor '", e.name, "' has ", e.ne.size(),
                 " dims; LoRA weights are 2-d");
    ZENITH_CHECK(e.type == uint32_t(gguf::TensorType::f32) ||
                     e.type == uint32_t(gguf::TensorType::f16) ||
                     e.type == uint32_t(gguf::TensorType::bf16),
                 "[gguf] ", path, ": tensor '", e.name, "' is ", gguf::tensor_type_name(e.type),
                 "; LoRA weights are f32, f16 or bf16");
    // lora_a [r, in] (GGUF's ne [in, r]) and lora_b [out, r] of the base's weight [out, in].
    const Shape& weight = it->second.second;
    ZENITH_CHECK(e.ne[0] >= 1 && e.ne[1] >= 1 && (is_a ? e.ne[0] : e.ne[1]) == weight[is_a ? 1 : 0],
                 "[gguf] ", path, ": tensor '", e.name, "' has ne [", e.ne[0], ", ", e.ne[1],
                 "], which does not fit the base model: its ", target, " is [", weight[0], ", ",
                 weight[1], "] (lora_a must have ne [", weight[1], ", r], lora_b ne [r, ",
                 weight[0], "])");
    const std::string& module = it->second.first;
    io::LoraWeights& w = adapter.modules[module];
    Tensor& slot = is_a ? w.A : w.B;
    ZENITH_CHECK(!slot.defined(), "[gguf] ", path, ": tensor '", e.name, "' appears twice");
    slot = gguf::read_tensor(f, e);
    short_names.insert(module.substr(module.rfind('.') + 1));
  }
  ZENITH_CHECK(!adapter.modules.empty(), "[gguf] ", path, ": holds no LoRA weights");
  int64_t r = 0;
  for (const auto& [module, w] : adapter.modules) {
    ZENITH_CHECK(w.A.defined() && w.B.defined(), "[gguf] ", path, ": ", module, " has lora_",
                 w.A.defined() ? "a" : "b", " but no lora_", w.A.defined() ? "b" : "a");
    if (r == 0) r = w.A.size(0);
    ZENITH_CHECK(w.A.size(0) == r && w.B.size(1) == r, "[gguf] ", path, ": ", module, " has rank ",
                 w.A.size(0), " (lora_a) and ", w.B.size(1),
                 " (lora_b); every tensor must have the first tensor's rank ", r);
  }
  // llama.cpp scales by alpha / r (no alpha: by 1, as llama.cpp reads it).
  const double alpha = f.get_float("adapter.lora.alpha", double(r));
  ZENITH_CHECK(std::isfinite(alpha), "[gguf] ", path, ": adapter.lora.alpha is not finite");
  io::LoraConfig& c = adapter.config;
  c.r = r;
  c.lora_alpha = alpha;
  c.lora_dropout = 0;
  c.target_modules.assign(short_names.begin(), short_names.end());
  check_lora_adapter(base, adapter, path);  // shapes fit the base before rows move
  for (auto& [module, w] : adapter.modules) {
    const bool is_q = module.ends_with("q_proj"), is_k = module.ends_with("k_proj");
    if (is_q || is_k)
      w.B = detail::permute_rotary_rows(
          w.B, is_q ? base.num_attention_heads : base.num_key_value_heads, false);
  }
  return adapter;
}

io::LoraAdapter read_lora_adapter(const std::string& path, const LlamaConfig& base) {
  if (is_gguf_file(path)) return load_gguf_adapter(path, base);
  return io::load_lora_adapter(path);
}

}  // namespace zenith::models
