// The parameters a LLaMA-family config implies, under Hugging Face's names, and checks of weight
// files and LoRA adapters against them.
#include <regex>
#include <set>

#include "zenith/llama_config.h"

namespace zenith::models {

namespace {

constexpr size_t kMaxListed = 20;  // problems listed in one error before "... and N more"

struct Found {
  Shape shape;
  DType dtype;
  std::string file;  // empty when the tensors were passed in memory
};

std::string where(const Found& f) { return f.file.empty() ? "" : " in " + f.file; }

[[noreturn]] void fail_with(const std::string& head, const std::vector<std::string>& problems) {
  std::string msg = head;
  for (size_t i = 0; i < problems.size() && i < kMaxListed; ++i) msg += "\n  " + problems[i];
  if (problems.size() > kMaxListed)
    msg += "\n  ... and " + std::to_string(problems.size() - kMaxListed) + " more";
  throw Error(msg);
}

std::string describe(const LlamaConfig& c) {
  return detail::concat(c.architecture, ": ", c.num_hidden_layers, " layers, hidden ",
                        c.hidden_size, ", ", c.num_attention_heads, " heads (",
                        c.num_key_value_heads, " kv) of ", c.head_dim, ", vocab ", c.vocab_size,
                        c.tie_word_embeddings ? ", tied" : "");
}

void check_state(const LlamaConfig& config, const std::map<std::string, Found>& state,
                 const std::string& source) {
  std::map<std::string, Shape> expected;
  std::vector<std::string> order;
  for (auto& p : expected_llama_parameters(config)) {
    order.push_back(p.name);
    expected[p.name] = p.shape;
  }
  static const std::regex inv_freq(R"(model\.layers\.\d+\.self_attn\.rotary_emb\.inv_freq)");
  std::vector<std::string> problems;  // what is there and wrong first, then what is missing
  for (const auto& [name, found] : state) {
    auto it = expected.find(name);
    Shape want;
    if (it != expected.end()) {
      want = it->second;
    } else if (name == "lm_head.weight" && config.tie_word_embeddings) {
      want = {config.vocab_size, config.hidden_size};  // ignored, as transformers ignores it
    } else if (std::regex_match(name, inv_freq)) {
      continue;  // a buffer older transformers saved; recomputed from rope_theta
    } else {
      problems.push_back("unexpected tensor '" + name + "'" + where(found));
      continue;
    }
    if (found.shape != want)
      problems.push_back("tensor '" + name + "'" + where(found) + " has shape " +
                         shape_str(found.shape) + ", config.json gives " + shape_str(want));
    else if (!is_floating(found.dtype))
      problems.push_back("tensor '" + name + "'" + where(found) + " is " + dtype_name(found.dtype) +
                         "; weights are floating point");
  }
  for (const auto& name : order)
    if (!state.count(name))
      problems.push_back("missing tensor '" + name + "' " + shape_str(expected[name]));
  if (!problems.empty())
    fail_with(detail::concat("[llama] ", source, ": the weights do not fit config.json (",
                             describe(config), "): ", problems.size(), " problem",
                             problems.size() == 1 ? "" : "s"),
              problems);
}

}  // namespace

std::vector<ParameterSpec> expected_llama_parameters(const LlamaConfig& c) {
  const int64_t h = c.hidden_size, inter = c.intermediate_size;
  std::vector<ParameterSpec> out = {{"model.embed_tokens.weight", {c.vocab_size, h}}};
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string layer = "model.layers." + std::to_string(i) + ".";
    auto linear = [&](const std::string& module, int64_t out_features, int64_t in_features,
                      bool bias) {
      out.push_back({layer + module + ".weight", {out_features, in_features}});
      if (bias) out.push_back({layer + module + ".bias", {out_features}});
    };
    linear("self_attn.q_proj", c.q_dim(), h, c.qkv_bias());
    linear("self_attn.k_proj", c.kv_dim(), h, c.qkv_bias());
    linear("self_attn.v_proj", c.kv_dim(), h, c.qkv_bias());
    linear("self_attn.o_proj", h, c.q_dim(), c.o_bias());
    linear("mlp.gate_proj", inter, h, c.mlp_bias);
    linear("mlp.up_proj", inter, h, c.mlp_bias);
    linear("mlp.down_proj", h, inter, c.mlp_bias);
    out.push_back({layer + "input_layernorm.weight", {h}});
    out.push_back({layer + "post_attention_layernorm.weight", {h}});
  }
  out.push_back({"model.norm.weight", {h}});
  if (!c.tie_word_embeddings) out.push_back({"lm_head.weight", {c.vocab_size, h}});
  return out;
}

void check_llama_state(const LlamaConfig& config, const std::map<std::string, Tensor>& tensors,
                       const std::string& source) {
  std::map<std::string, Found> state;
  for (const auto& [name, t] : tensors) state[name] = {t.shape(), t.dtype(), ""};
  check_state(config, state, source);
}

void check_llama_state(const LlamaConfig& config, const std::vector<io::TensorInfo>& tensors,
                       const std::string& source) {
  std::map<std::string, Found> state;
  for (const auto& t : tensors) state[t.name] = {t.shape, t.dtype, t.file};
  check_state(config, state, source);
}

Shape llama_linear_shape(const LlamaConfig& c, const std::string& module_path) {
  if (module_path == "lm_head") return {c.vocab_size, c.hidden_size};
  static const std::regex layer_module(
      R"(model\.layers\.(\d+)\.(self_attn\.(q|k|v|o)_proj|mlp\.(gate|up|down)_proj))");
  std::smatch m;
  if (std::regex_match(module_path, m, layer_module) &&
      std::stoll(m[1].str()) < c.num_hidden_layers) {
    const std::string which = m[3].matched ? m[3].str() : m[4].str();
    if (which == "q") return {c.q_dim(), c.hidden_size};
    if (which == "k" || which == "v") return {c.kv_dim(), c.hidden_size};
    if (which == "o") return {c.hidden_size, c.q_dim()};
    if (which == "down") return {c.hidden_size, c.intermediate_size};
    return {c.intermediate_size, c.hidden_size};  // gate, up
  }
  ZENITH_FAIL("[llama] the model (", describe(c), ") has no linear layer '", module_path,
              "'; its linear layers are model.layers.<0..", c.num_hidden_layers - 1,
              ">.self_attn.{q,k,v,o}_proj, model.layers.<i>.mlp.{gate,up,down}_proj and lm_head");
}

void check_lora_adapter(const LlamaConfig& config, const io::LoraAdapter& adapter,
                        const std::string& source) {
  const int64_t r = adapter.config.r;
  std::vector<std::string> problems;
  for (const auto& [module, w] : adapter.modules) {
    const std::string prefix = "base_model.model." + module;
    Shape layer;
    try {
      layer = llama_linear_shape(config, module);
    } catch (const Error&) {
      problems.push_back("tensor '" + prefix + ".lora_A.weight' adapts " + module +
                         ", which the base model does not have");
      continue;
    }
    const Shape want_a = {r, layer[1]}, want_b = {layer[0], r};
    if (w.A.shape() != want_a)
      problems.push_back("tensor '" + prefix + ".lora_A.weight' has shape " +
                         shape_str(w.A.shape()) + "; the base model's " + module + " takes " +
                         std::to_string(layer[1]) + " inputs, so lora_A must be " +
                         shape_str(want_a));
    if (w.B.shape() != want_b)
      problems.push_back("tensor '" + prefix + ".lora_B.weight' has shape " +
                         shape_str(w.B.shape()) + "; the base model's " + module + " has " +
                         std::to_string(layer[0]) + " outputs, so lora_B must be " +
                         shape_str(want_b));
  }
  if (!problems.empty())
    fail_with(detail::concat("[peft] ", source, ": the adapter does not fit the base model (",
                             describe(config), "; an adapter for another base?): ", problems.size(),
                             " problem", problems.size() == 1 ? "" : "s"),
              problems);
}

}  // namespace zenith::models
