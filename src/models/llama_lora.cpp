// PEFT LoRA adapters on models::Llama: targets as PEFT matches them, fresh adapters, adapters
// from and to PEFT directories, merging.
#include <set>

#include "zenith/gguf.h"
#include "zenith/llama.h"

namespace zenith::models {
namespace {

bool matches(const std::string& path, const std::string& target) {
  return path == target ||
         (path.size() > target.size() &&
          path.compare(path.size() - target.size() - 1, target.size() + 1, "." + target) == 0);
}

// "q_proj, k_proj, ..., lm_head": the last component of each linear layer's path.
std::string linear_names(const Llama& model) {
  std::vector<std::string> names;
  std::set<std::string> seen;
  for (const auto& [path, _] : model.linear_layers()) {
    std::string leaf = path.substr(path.rfind('.') + 1);
    if (seen.insert(leaf).second) names.push_back(leaf);
  }
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

const nn::LoraSpec& spec_of(const io::LoraConfig& c) { return c; }

std::shared_ptr<nn::LoraLinear> find_layer(const Llama& model, const std::string& path) {
  for (const auto& [p, layer] : model.linear_layers())
    if (p == path) return layer;
  return nullptr;
}

}  // namespace

std::vector<std::string> lora_targets(const Llama& model, const io::LoraConfig& config) {
  const auto layers = model.linear_layers();
  std::vector<std::string> out;
  for (const auto& [path, _] : layers)
    if (config.targets(path)) out.push_back(path);
  std::vector<std::string> unknown;
  if (!config.all_linear && config.target_regex.empty())
    for (const auto& t : config.target_modules) {
      bool hit = false;
      for (const auto& [path, _] : layers) hit = hit || matches(path, t);
      if (!hit) unknown.push_back(t);
    }
  if (!unknown.empty()) {
    std::string list;
    for (const auto& u : unknown) list += (list.empty() ? "'" : ", '") + u + "'";
    ZENITH_FAIL("[lora] target module", unknown.size() == 1 ? " " : "s ", list,
                " not in the model; its linear layers are ", linear_names(model),
                " (model.layers.N.self_attn.*, model.layers.N.mlp.*), or all-linear");
  }
  ZENITH_CHECK(!out.empty(),
               "[lora] the adapter config targets no linear layer of the model (check "
               "target_modules and layers_to_transform); its linear layers are ",
               linear_names(model));
  return out;
}

std::vector<std::string> add_lora(Llama& model, const io::LoraConfig& config) {
  ZENITH_CHECK(config.r > 0, "[lora] r must be positive, got ", config.r);
  std::vector<std::string> targets = lora_targets(model, config);
  for (const auto& path : targets) find_layer(model, path)->add_adapter(spec_of(config));
  return targets;
}

void apply_lora(Llama& model, const io::LoraAdapter& adapter, const std::string& source) {
  const std::string where = source.empty() ? "adapter" : source;
  check_lora_adapter(model.config(), adapter, where);
  for (const auto& [path, w] : adapter.modules) {
    auto layer = find_layer(model, path);
    ZENITH_CHECK(layer != nullptr, "[peft] ", where, ": adapts ", path,
                 ", which this model does not have (tied embeddings have no lm_head)");
    layer->set_adapter(spec_of(adapter.config), w.A, w.B);
  }
}

void load_lora(Llama& model, const std::string& adapter_dir) {
  apply_lora(model, read_lora_adapter(adapter_dir, model.config()), adapter_dir);
}

io::LoraAdapter lora_adapter(const Llama& model, const io::LoraConfig& config) {
  io::LoraAdapter adapter{.config = config, .modules = {}};
  for (const auto& [path, layer] : model.linear_layers()) {
    if (!layer->has_adapter()) continue;
    ZENITH_CHECK(layer->adapter_spec().r == config.r, "[lora] ", path, " has an adapter of rank ",
                 layer->adapter_spec().r, ", the adapter config says r ", config.r);
    adapter.modules[path] = {layer->lora_A().detach(), layer->lora_B().detach()};
  }
  ZENITH_CHECK(!adapter.modules.empty(), "[lora] the model carries no adapter to save");
  return adapter;
}

void save_lora(const Llama& model, const io::LoraConfig& config, const std::string& dir) {
  io::save_lora_adapter(dir, lora_adapter(model, config));
}

std::vector<std::string> merge_lora(Llama& model) {
  std::vector<std::string> merged;
  for (const auto& [path, layer] : model.linear_layers()) {
    if (!layer->has_adapter()) continue;
    layer->merge();
    merged.push_back(path);
  }
  return merged;
}

}  // namespace zenith::models
