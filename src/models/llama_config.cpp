// config.json of the LLaMA family, read with the defaults of transformers' LlamaConfig,
// MistralConfig and Qwen2Config for absent keys, and written back with the same keys.
#include "zenith/llama_config.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "core/atomic_file.h"
#include "io/json_fields.h"
#include "zenith/gguf.h"

namespace zenith::models {

namespace fs = std::filesystem;

namespace {

constexpr const char* kComponent = "llama_config";

// The transformers config class defaults that differ between the supported architectures.
struct Family {
  const char* architecture;
  const char* model_type;
  int64_t vocab_size, intermediate_size, max_position_embeddings;
  std::optional<int64_t> num_key_value_heads;  // nullopt: num_attention_heads
  std::optional<int64_t> bos, eos;
};
const Family kFamilies[] = {
    {"LlamaForCausalLM", "llama", 32000, 11008, 2048, std::nullopt, 1, 2},
    {"MistralForCausalLM", "mistral", 32000, 14336, 4096 * 32, 8, 1, 2},
    {"Qwen2ForCausalLM", "qwen2", 151936, 22016, 32768, 32, std::nullopt, std::nullopt},
};

std::string supported_list() {
  std::string s;
  for (const auto& f : kFamilies)
    s += std::string(s.empty() ? "" : ", ") + f.architecture + " (model_type " + f.model_type + ")";
  return s;
}

const Family& find_family(const io::JsonFields& f, const nlohmann::json& j) {
  if (f.has("architectures")) {
    std::vector<std::string> archs = f.strings("architectures");
    if (archs.empty()) f.fail("architectures", "is an empty list; supported: ", supported_list());
    for (const auto& family : kFamilies) {
      if (archs[0] != family.architecture) continue;
      if (f.has("model_type") && f.string("model_type") != family.model_type)
        f.fail("model_type", "is '", f.string("model_type"), "', but architectures names ",
               archs[0], " (model_type ", family.model_type, ")");
      return family;
    }
    f.fail("architectures", "is ", j.at("architectures").dump(),
           ", not a supported architecture; supported: ", supported_list());
  }
  if (f.has("model_type")) {
    std::string type = f.string("model_type");
    for (const auto& family : kFamilies)
      if (type == family.model_type) return family;
    f.fail("model_type", "is '", type,
           "', not a supported model type; supported: ", supported_list());
  }
  f.fail("architectures", "is missing (and so is model_type); supported: ", supported_list());
}

int64_t positive(const io::JsonFields& f, const std::string& key, int64_t fallback) {
  int64_t v = f.integer(key, fallback);
  if (v <= 0) f.fail(key, "must be positive, got ", v);
  return v;
}

double positive_number(const io::JsonFields& f, const std::string& key, double fallback) {
  double v = f.number(key, fallback);
  if (!(v > 0)) f.fail(key, "must be positive, got ", v);
  return v;
}

// Required keys.
int64_t positive(const io::JsonFields& f, const std::string& key) {
  return positive(f, key, f.integer(key));
}
double positive_number(const io::JsonFields& f, const std::string& key) {
  return positive_number(f, key, f.number(key));
}

const char* rope_type_name(RopeScaling::Type t) {
  switch (t) {
    case RopeScaling::Type::linear:
      return "linear";
    case RopeScaling::Type::llama3:
      return "llama3";
    default:
      return "default";
  }
}

// rope_scaling (or transformers 5's rope_parameters): {"rope_type" or "type": ..., ...}.
RopeScaling parse_rope_scaling(const nlohmann::json& value, const std::string& key,
                               const std::string& source) {
  ZENITH_CHECK(value.is_object(), "[", kComponent, "] ", source, ": key '", key,
               "' must be an object or null, got ", io::json_type_phrase(value));
  io::JsonFields f(value, kComponent, source, key + ".");
  std::string type = f.has("rope_type") ? f.string("rope_type") : f.string("type", "default");
  RopeScaling r;
  if (type == "default") return r;
  if (type == "linear") {
    r.type = RopeScaling::Type::linear;
    r.factor = positive_number(f, "factor");
  } else if (type == "llama3") {
    r.type = RopeScaling::Type::llama3;
    r.factor = positive_number(f, "factor");
    r.low_freq_factor = positive_number(f, "low_freq_factor");
    r.high_freq_factor = positive_number(f, "high_freq_factor");
    r.original_max_position_embeddings = positive(f, "original_max_position_embeddings");
    if (r.high_freq_factor <= r.low_freq_factor)
      f.fail("high_freq_factor", "(", r.high_freq_factor, ") must exceed low_freq_factor (",
             r.low_freq_factor, ")");
  } else {
    f.fail(f.has("rope_type") ? "rope_type" : "type", "is '", type,
           "', not supported; supported: default, linear, llama3");
  }
  return r;
}

// Sliding-window attention is not implemented: a window that ever applies is an error. An
// absent sliding_window takes the config class's default (4096); null means none.
void reject_sliding_window(const io::JsonFields& f, const nlohmann::json& j, const LlamaConfig& c) {
  bool windowed = c.model_type == "mistral" ||
                  (c.model_type == "qwen2" && f.boolean("use_sliding_window", false));
  if (!windowed) return;
  int64_t window = !j.contains("sliding_window") ? 4096
                   : f.has("sliding_window")     ? f.integer("sliding_window")
                                                 : INT64_MAX;
  // Qwen2 applies its window from layer max_window_layers on.
  bool some_layer =
      c.model_type != "qwen2" || f.integer("max_window_layers", 28) < c.num_hidden_layers;
  if (window < c.max_position_embeddings && some_layer)
    f.fail("sliding_window", j.contains("sliding_window") ? "is " : "is absent, so ", window,
           ", below max_position_embeddings (", c.max_position_embeddings,
           "): sliding-window attention is not supported (null or >= max_position_embeddings "
           "means full attention)");
}

}  // namespace

std::vector<std::string> supported_llama_architectures() {
  std::vector<std::string> out;
  for (const auto& f : kFamilies) out.push_back(f.architecture);
  return out;
}

LlamaConfig parse_llama_config(const std::string& json_text, const std::string& source) {
  const nlohmann::json j = io::parse_json_object(json_text, kComponent, source);
  io::JsonFields f(j, kComponent, source);
  const Family& family = find_family(f, j);
  LlamaConfig c;
  c.architecture = family.architecture;
  c.model_type = family.model_type;
  c.vocab_size = positive(f, "vocab_size", family.vocab_size);
  c.hidden_size = positive(f, "hidden_size", 4096);
  c.intermediate_size = positive(f, "intermediate_size", family.intermediate_size);
  c.num_hidden_layers = positive(f, "num_hidden_layers", 32);
  c.num_attention_heads = positive(f, "num_attention_heads", 32);
  // An explicit null means "as many as the query heads", as in transformers.
  c.num_key_value_heads = positive(f, "num_key_value_heads",
                                   j.contains("num_key_value_heads") || !family.num_key_value_heads
                                       ? c.num_attention_heads
                                       : *family.num_key_value_heads);
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    f.fail("num_key_value_heads", "(", c.num_key_value_heads, ") must divide num_attention_heads (",
           c.num_attention_heads, ")");
  if (!f.has("head_dim") && c.hidden_size % c.num_attention_heads != 0)
    f.fail("hidden_size", "(", c.hidden_size, ") is not a multiple of num_attention_heads (",
           c.num_attention_heads, ") and head_dim is not given");
  c.head_dim = positive(f, "head_dim", c.hidden_size / c.num_attention_heads);
  if (c.head_dim % 2 != 0)
    f.fail("head_dim", "is ", c.head_dim, ": rotary embeddings need an even head size");
  c.max_position_embeddings =
      positive(f, "max_position_embeddings", family.max_position_embeddings);
  c.rms_norm_eps = positive_number(f, "rms_norm_eps", 1e-6);

  c.transformers_v5_keys = f.has("rope_parameters");
  if (c.transformers_v5_keys) {
    const auto& params = f.at("rope_parameters");
    c.rope_scaling = parse_rope_scaling(params, "rope_parameters", source);
    io::JsonFields p(params, kComponent, source, "rope_parameters.");
    c.rope_theta = positive_number(p, "rope_theta", positive_number(f, "rope_theta", 10000));
  } else {
    c.rope_theta = positive_number(f, "rope_theta", 10000);
    if (f.has("rope_scaling"))
      c.rope_scaling = parse_rope_scaling(f.at("rope_scaling"), "rope_scaling", source);
  }
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", false);
  if (c.model_type == "llama") {
    c.attention_bias = f.boolean("attention_bias", false);
    c.mlp_bias = f.boolean("mlp_bias", false);
  }
  c.hidden_act = f.string("hidden_act", "silu");
  if (c.hidden_act != "silu")
    f.fail("hidden_act", "is '", c.hidden_act, "': LLaMA-family models use silu (SwiGLU)");
  const char* dtype_key = f.has("dtype") ? "dtype" : "torch_dtype";
  c.torch_dtype = f.string(dtype_key, "");
  static const std::set<std::string> dtypes = {"", "float32", "bfloat16", "float16"};
  if (!dtypes.count(c.torch_dtype))
    f.fail(dtype_key, "is '", c.torch_dtype, "'; supported: float32, bfloat16, float16");
  c.bos_token_id = j.contains("bos_token_id") ? f.optional_integer("bos_token_id") : family.bos;
  if (j.contains("eos_token_id"))
    c.eos_token_ids = f.integers("eos_token_id");
  else
    c.eos_token_ids = family.eos ? std::vector<int64_t>{*family.eos} : std::vector<int64_t>{};
  c.pad_token_id = f.optional_integer("pad_token_id");
  reject_sliding_window(f, j, c);

  static const std::set<std::string> interpreted = {"architectures",
                                                    "model_type",
                                                    "vocab_size",
                                                    "hidden_size",
                                                    "intermediate_size",
                                                    "num_hidden_layers",
                                                    "num_attention_heads",
                                                    "num_key_value_heads",
                                                    "head_dim",
                                                    "max_position_embeddings",
                                                    "rms_norm_eps",
                                                    "rope_theta",
                                                    "rope_scaling",
                                                    "rope_parameters",
                                                    "tie_word_embeddings",
                                                    "hidden_act",
                                                    "torch_dtype",
                                                    "dtype",
                                                    "bos_token_id",
                                                    "eos_token_id",
                                                    "pad_token_id"};
  for (const auto& [key, value] : j.items()) {
    bool bias_key = key == "attention_bias" || key == "mlp_bias";
    if (!interpreted.count(key) && !(bias_key && c.model_type == "llama"))
      c.extra[key] = value.dump();
  }
  return c;
}

LlamaConfig load_llama_config(const std::string& path) {
  if (is_gguf_file(path)) return gguf_llama_config(path);  // a llama.cpp file's metadata
  std::string file = fs::is_directory(path) ? (fs::path(path) / "config.json").string() : path;
  return parse_llama_config(core::read_file(file, kComponent), file);
}

std::string llama_config_json(const LlamaConfig& c) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [key, text] : c.extra) j[key] = nlohmann::json::parse(text);
  j["architectures"] = {c.architecture};
  j["model_type"] = c.model_type;
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["head_dim"] = c.head_dim;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rms_norm_eps"] = c.rms_norm_eps;
  nlohmann::json scaling = nullptr;
  const RopeScaling& r = c.rope_scaling;
  if (r.type != RopeScaling::Type::none) {
    scaling = {{"rope_type", rope_type_name(r.type)}, {"factor", r.factor}};
    if (r.type == RopeScaling::Type::llama3) {
      scaling["low_freq_factor"] = r.low_freq_factor;
      scaling["high_freq_factor"] = r.high_freq_factor;
      scaling["original_max_position_embeddings"] = r.original_max_position_embeddings;
    }
  }
  if (c.transformers_v5_keys) {
    if (scaling.is_null()) scaling = {{"rope_type", "default"}};
    scaling["rope_theta"] = c.rope_theta;
    j["rope_parameters"] = scaling;
  } else {
    j["rope_theta"] = c.rope_theta;
    j["rope_scaling"] = scaling;
  }
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  if (c.model_type == "llama") {
    j["attention_bias"] = c.attention_bias;
    j["mlp_bias"] = c.mlp_bias;
  }
  j["hidden_act"] = c.hidden_act;
  if (!c.torch_dtype.empty()) j[c.transformers_v5_keys ? "dtype" : "torch_dtype"] = c.torch_dtype;
  j["bos_token_id"] = c.bos_token_id ? nlohmann::json(*c.bos_token_id) : nlohmann::json(nullptr);
  if (c.eos_token_ids.empty())
    j["eos_token_id"] = nullptr;
  else if (c.eos_token_ids.size() == 1)
    j["eos_token_id"] = c.eos_token_ids[0];
  else
    j["eos_token_id"] = c.eos_token_ids;
  j["pad_token_id"] = c.pad_token_id ? nlohmann::json(*c.pad_token_id) : nlohmann::json(nullptr);
  return j.dump(2) + "\n";
}

void save_llama_config(const std::string& path, const LlamaConfig& config) {
  std::string file = fs::is_directory(path) ? (fs::path(path) / "config.json").string() : path;
  core::write_file_atomic(file, llama_config_json(config));
}

}  // namespace zenith::models
