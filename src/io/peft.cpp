// PEFT LoRA adapter directories: adapter_config.json (PEFT's LoraConfig, sorted keys) and
// adapter_model.safetensors, whose tensor names drop PEFT's adapter name ("default"):
// base_model.model.<module>.lora_A.weight [r, in], base_model.model.<module>.lora_B.weight [out,
// r].
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "core/atomic_file.h"
#include "io/json_fields.h"
#include "zenith/hf.h"

namespace zenith::io {

namespace fs = std::filesystem;

namespace {

constexpr const char* kComponent = "peft";
constexpr const char* kPrefix = "base_model.model.";

std::string config_path(const std::string& path) {
  return fs::is_directory(path) ? (fs::path(path) / kAdapterConfigFile).string() : path;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The layer index PEFT's layers_to_transform looks at: the number after the first "<name>." that
// follows a dot ("model.layers.3.mlp.up_proj" -> 3).
std::optional<int64_t> layer_index(const std::string& module_path) {
  static const std::regex pattern(R"(^.*?\.[^.]*\.(\d+)\.)");
  std::smatch m;
  if (!std::regex_search(module_path, m, pattern)) return std::nullopt;
  return std::stoll(m[1].str());
}

// Keys PEFT writes that change what the adapter computes and that zenith does not implement:
// each must be absent, null, false or empty.
void reject_unsupported(const JsonFields& f, const nlohmann::json& j) {
  for (const char* key : {"use_dora", "lora_bias", "modules_to_save", "rank_pattern",
                          "alpha_pattern", "exclude_modules", "target_parameters",
                          "layer_replication", "trainable_token_indices", "use_qalora"}) {
    if (!f.has(key)) continue;
    const auto& v = j.at(key);
    bool off = v == false || (v.is_object() && v.empty()) || (v.is_array() && v.empty());
    if (!off) f.fail(key, "is ", v.dump(), ": not supported by zenith (only plain LoRA)");
  }
  if (f.has("init_lora_weights") && j.at("init_lora_weights").is_string()) {
    std::string init = j.at("init_lora_weights").get<std::string>();
    for (const char* changes_base : {"pissa", "olora", "corda", "loftq", "mica"})
      if (init.rfind(changes_base, 0) == 0)
        f.fail("init_lora_weights", "is '", init,
               "': such adapters need the base weights PEFT modified when it initialised them; "
               "save them with path_initial_model_for_weight_conversion");
  }
}

}  // namespace

bool LoraConfig::targets(const std::string& module_path) const {
  if (!target_regex.empty()) return std::regex_match(module_path, std::regex(target_regex));
  bool found = false;
  if (all_linear) {
    found = module_path != "lm_head";
  } else {
    for (const auto& t : target_modules)
      found = found || module_path == t || ends_with(module_path, "." + t);
  }
  if (!found || layers_to_transform.empty()) return found;
  auto layer = layer_index(module_path);
  return layer && std::find(layers_to_transform.begin(), layers_to_transform.end(), *layer) !=
                      layers_to_transform.end();
}

LoraConfig read_lora_config(const std::string& path_or_dir) {
  const std::string path = config_path(path_or_dir);
  nlohmann::json j = read_json_object(path, kComponent);
  JsonFields f(j, kComponent, path);
  std::string peft_type = f.string("peft_type");
  if (peft_type != "LORA") f.fail("peft_type", "is '", peft_type, "'; zenith reads LORA adapters");
  reject_unsupported(f, j);

  LoraConfig c;
  c.r = f.integer("r", 8);
  if (c.r <= 0) f.fail("r", "must be positive, got ", c.r);
  c.lora_alpha = f.number("lora_alpha", 8);
  c.lora_dropout = f.number("lora_dropout", 0);
  if (c.lora_dropout < 0 || c.lora_dropout >= 1)
    f.fail("lora_dropout", "must be in [0, 1), got ", c.lora_dropout);
  c.bias = f.string("bias", "none");
  if (c.bias != "none")
    f.fail("bias", "is '", c.bias, "': only \"none\" is supported (no trained biases)");
  c.use_rslora = f.boolean("use_rslora", false);
  c.fan_in_fan_out = f.boolean("fan_in_fan_out", false);
  if (c.fan_in_fan_out)
    f.fail("fan_in_fan_out",
           "is true, which describes Conv1D-style [in, out] weights; LLaMA-family layers are "
           "nn.Linear [out, in]");
  c.task_type = f.string("task_type", "");
  if (!c.task_type.empty() && c.task_type != "CAUSAL_LM")
    f.fail("task_type", "is '", c.task_type, "'; zenith adapts causal LMs (CAUSAL_LM)");
  c.base_model_name_or_path = f.string("base_model_name_or_path", "");
  if (f.has("revision")) c.revision = f.string("revision");
  c.inference_mode = f.boolean("inference_mode", false);

  const auto& targets = f.at("target_modules");
  if (targets.is_string()) {
    std::string t = targets.get<std::string>();
    if (t == "all-linear") {
      c.all_linear = true;
    } else {
      try {
        std::regex check(t);
      } catch (const std::regex_error& e) {
        f.fail("target_modules", "is not a valid regular expression: '", t, "': ", e.what());
      }
      c.target_regex = t;
    }
  } else {
    c.target_modules = f.strings("target_modules");
  }
  c.layers_to_transform = f.integers("layers_to_transform");
  if (!c.layers_to_transform.empty() && !c.target_regex.empty())
    f.fail("layers_to_transform", "cannot be used with a regular expression in target_modules");
  if (f.has("layers_pattern")) {
    const auto& p = j.at("layers_pattern");
    bool plain = p == "layers" || p == nlohmann::json::array({"layers"}) ||
                 (p.is_array() && p.empty()) || p == "";
    if (!plain) f.fail("layers_pattern", "is ", p.dump(), ": only \"layers\" is supported");
  }

  static const std::set<std::string> interpreted = {"peft_type",
                                                    "r",
                                                    "lora_alpha",
                                                    "lora_dropout",
                                                    "bias",
                                                    "use_rslora",
                                                    "fan_in_fan_out",
                                                    "task_type",
                                                    "base_model_name_or_path",
                                                    "revision",
                                                    "inference_mode",
                                                    "target_modules",
                                                    "layers_to_transform"};
  for (const auto& [key, value] : j.items())
    if (!interpreted.count(key)) c.extra[key] = value.dump();
  return c;
}

std::string lora_config_json(const LoraConfig& c) {
  ZENITH_CHECK(c.r > 0, "[peft] r must be positive, got ", c.r);
  nlohmann::json j = {
      // PEFT's defaults for the fields it always writes; `extra` (read from a file) wins.
      {"alpha_pattern", nlohmann::json::object()},
      {"auto_mapping", nullptr},
      {"init_lora_weights", true},
      {"layers_pattern", nullptr},
      {"modules_to_save", nullptr},
      {"rank_pattern", nlohmann::json::object()},
  };
  for (const auto& [key, text] : c.extra) j[key] = nlohmann::json::parse(text);
  j["peft_type"] = "LORA";
  j["r"] = c.r;
  if (c.lora_alpha == std::floor(c.lora_alpha) && std::abs(c.lora_alpha) < 1e15)
    j["lora_alpha"] = int64_t(c.lora_alpha);  // PEFT types it as int
  else
    j["lora_alpha"] = c.lora_alpha;
  j["lora_dropout"] = c.lora_dropout;
  j["bias"] = c.bias;
  j["use_rslora"] = c.use_rslora;
  j["fan_in_fan_out"] = c.fan_in_fan_out;
  j["task_type"] = c.task_type.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.task_type);
  j["base_model_name_or_path"] = c.base_model_name_or_path.empty()
                                     ? nlohmann::json(nullptr)
                                     : nlohmann::json(c.base_model_name_or_path);
  j["revision"] = c.revision ? nlohmann::json(*c.revision) : nlohmann::json(nullptr);
  j["inference_mode"] = c.inference_mode;
  if (c.all_linear)
    j["target_modules"] = "all-linear";
  else if (!c.target_regex.empty())
    j["target_modules"] = c.target_regex;
  else
    j["target_modules"] = c.target_modules;
  j["layers_to_transform"] = c.layers_to_transform.empty() ? nlohmann::json(nullptr)
                                                           : nlohmann::json(c.layers_to_transform);
  return j.dump(2);
}

void write_lora_config(const std::string& path, const LoraConfig& config) {
  core::write_file_atomic(config_path(path), lora_config_json(config));
}

LoraAdapter load_lora_adapter(const std::string& dir) {
  LoraAdapter adapter;
  adapter.config = read_lora_config((fs::path(dir) / kAdapterConfigFile).string());
  const std::string path = (fs::path(dir) / kAdapterWeightsFile).string();
  ZENITH_CHECK(fs::exists(path) || !fs::exists(fs::path(dir) / "adapter_model.bin"), "[peft] ", dir,
               ": holds PyTorch pickle weights (adapter_model.bin); zenith reads safetensors "
               "(save the adapter with safe_serialization=True)");
  ZENITH_CHECK(fs::exists(path), "[peft] ", dir, ": no ", kAdapterWeightsFile);
  const LoraConfig& c = adapter.config;
  for (auto& [name, t] : load_safetensors(path)) {
    auto bad = [&](const auto&... what) {
      ZENITH_FAIL("[peft] ", path, ": tensor '", name, "' ", what...);
    };
    std::string rest = name;
    if (rest.rfind(kPrefix, 0) != 0) bad("does not start with '", kPrefix, "'");
    rest = rest.substr(std::string(kPrefix).size());
    // PEFT drops the adapter name when saving; a file that kept it (".lora_A.default.weight")
    // reads the same.
    static const std::regex lora(R"((.+)\.lora_([AB])(\.[^.]+)?\.weight)");
    std::smatch m;
    if (rest.find("lora_embedding_") != std::string::npos)
      bad("is an embedding LoRA weight: only linear layers are supported");
    if (!std::regex_match(rest, m, lora))
      bad("is not a LoRA weight (<module>.lora_A.weight or <module>.lora_B.weight)");
    std::string module = m[1].str();
    bool is_a = m[2].str() == "A";
    if (!c.targets(module)) bad("adapts ", module, ", which adapter_config.json does not target");
    if (t.dim() != 2) bad("has shape ", shape_str(t.shape()), "; LoRA weights are 2-d");
    int64_t rank = is_a ? t.size(0) : t.size(1);
    if (rank != c.r)
      bad("has shape ", shape_str(t.shape()), ": rank ", rank,
          ", but adapter_config.json says r = ", c.r, " (expected ", is_a ? "[r, in]" : "[out, r]",
          ")");
    Tensor& slot = is_a ? adapter.modules[module].A : adapter.modules[module].B;
    if (slot.defined()) bad("duplicates another lora_", m[2].str(), " weight of ", module);
    slot = std::move(t);
  }
  for (const auto& [module, w] : adapter.modules)
    ZENITH_CHECK(w.A.defined() && w.B.defined(), "[peft] ", path, ": module ", module, " has lora_",
                 w.A.defined() ? "A" : "B", " but no lora_", w.A.defined() ? "B" : "A");
  ZENITH_CHECK(!adapter.modules.empty(), "[peft] ", path, ": holds no LoRA weights");
  return adapter;
}

void save_lora_adapter(const std::string& dir, const LoraAdapter& adapter) {
  const LoraConfig& c = adapter.config;
  std::map<std::string, Tensor> tensors;
  for (const auto& [module, w] : adapter.modules) {
    ZENITH_CHECK(w.A.defined() && w.B.defined() && w.A.dim() == 2 && w.B.dim() == 2 &&
                     w.A.size(0) == c.r && w.B.size(1) == c.r && w.A.dtype() == w.B.dtype(),
                 "[peft] ", dir, ": module ", module,
                 " needs lora_A [r, in] and lora_B [out, r] of one dtype with r = ", c.r, ", got ",
                 w.A.defined() ? shape_str(w.A.shape()) : "undefined", " and ",
                 w.B.defined() ? shape_str(w.B.shape()) : "undefined");
    ZENITH_CHECK(c.targets(module), "[peft] ", dir, ": module ", module,
                 " is not targeted by the adapter's target_modules");
    tensors[kPrefix + module + ".lora_A.weight"] = w.A;
    tensors[kPrefix + module + ".lora_B.weight"] = w.B;
  }
  fs::create_directories(dir);
  // Weights first: the config is what makes a directory an adapter.
  save_safetensors((fs::path(dir) / kAdapterWeightsFile).string(), tensors, {{"format", "pt"}});
  write_lora_config((fs::path(dir) / kAdapterConfigFile).string(), c);
}

}  // namespace zenith::io
