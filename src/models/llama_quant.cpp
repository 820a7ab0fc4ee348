// models::Llama with quantized linear layers (GGML's blocks, include/zenith/quant.h): quantizing
// at load, installing blocks read from a file, and the safetensors directory `zenith quantize`
// writes (blocks as U8 tensors, config.json's quantization_config naming each layer's format).
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/allocator.h"
#include "zenith/hf.h"
#include "zenith/llama.h"

namespace zenith::models {
namespace {

constexpr const char* kQuantKey = "quantization_config";

// The format a layer of `in` input features takes when `format` is asked for.
std::optional<QuantFormat> layer_format(QuantFormat format, int64_t in) {
  if (in % quant_block_elems(format) == 0) return format;
  if (format == QuantFormat::q4_k && in % 32 == 0) return QuantFormat::q4_0;
  return std::nullopt;
}

// {path: format} from config.json's quantization_config; errors name the file and the key.
std::map<std::string, QuantFormat> quantized_layers(const LlamaConfig& config,
                                                    const std::string& dir) {
  auto it = config.extra.find(kQuantKey);
  ZENITH_CHECK(it != config.extra.end(), "[llama] ", dir, "/config.json has no ", kQuantKey);
  const std::string where = dir + "/config.json: " + kQuantKey;
  nlohmann::json q = nlohmann::json::parse(it->second, nullptr, false);
  ZENITH_CHECK(q.is_object() && q.value("quant_method", "") == "ggml", "[llama] ", where,
               " must be an object with \"quant_method\": \"ggml\"");
  ZENITH_CHECK(q.contains("layers") && q["layers"].is_object(), "[llama] ", where,
               " has no \"layers\" object {module path: format}");
  std::map<std::string, QuantFormat> out;
  for (const auto& [path, name] : q["layers"].items()) {
    ZENITH_CHECK(name.is_string(), "[llama] ", where, ".layers.", path, " must be a format name");
    out.emplace(path, quant_from_name(name.get<std::string>()));
  }
  return out;
}

}  // namespace

std::map<std::string, QuantFormat> Llama::quantize(QuantFormat format) {
  std::map<std::string, QuantFormat> out;
  for (const auto& [path, layer] : linear_layers()) {
    if (auto f = layer_format(format, layer->in_features())) {
      layer->quantize(*f);
      out.emplace(path, *f);
    }
  }
  core::empty_allocator_cache();  // the float weights' blocks go back to the system
  return out;
}

void Llama::set_quantized_weight(const std::string& path, QuantizedWeight weight) {
  for (const auto& [name, layer] : linear_layers())
    if (name == path) return layer->set_quantized_weight(std::move(weight));
  ZENITH_FAIL("[llama] no linear layer '", path, "' to take a quantized weight (",
              config_.num_hidden_layers, " layers; paths as model.layers.0.self_attn.q_proj)");
}

bool is_quantized_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir) || !fs::exists(fs::path(dir) / "config.json")) return false;
  return load_llama_config(dir).extra.count(kQuantKey) > 0;
}

std::shared_ptr<Llama> load_quantized(const std::string& dir) {
  LlamaConfig config = load_llama_config(dir);
  const std::map<std::string, QuantFormat> formats = quantized_layers(config, dir);
  std::map<std::string, Tensor> weights = io::load_hf_state(dir);
  // Each quantized layer's weight name gets a stand-in of the float shape that holds no memory
  // (a broadcast zero) until its blocks replace it.
  std::map<std::string, QuantizedWeight> blocks;
  for (const auto& [path, format] : formats) {
    auto it = weights.find(path + ".weight");
    ZENITH_CHECK(it != weights.end(), "[llama] ", dir, " lists ", path, " as ", quant_name(format),
                 " but has no tensor ", path, ".weight");
    const Tensor& b = it->second;
    ZENITH_CHECK(
        b.dtype() == DType::u8 && b.dim() == 2 && b.size(1) % quant_block_bytes(format) == 0,
        "[llama] ", dir, ": ", path, ".weight must be U8 [out, ", quant_block_bytes(format),
        " bytes per block] for ", quant_name(format), ", got ", dtype_name(b.dtype()), " ",
        shape_str(b.shape()));
    const int64_t in = b.size(1) / quant_block_bytes(format) * quant_block_elems(format);
    blocks[path] = {b, format, b.size(0), in};
    it->second = Tensor::zeros({1, 1}).expand({b.size(0), in});
  }
  auto model = std::make_shared<Llama>(std::move(config), std::move(weights), dir);
  for (auto& [path, w] : blocks) model->set_quantized_weight(path, std::move(w));
  return model;
}

void save_quantized(const Llama& model, const std::string& dir) {
  std::map<std::string, Tensor> state = model.hf_state();
  nlohmann::json layers = nlohmann::json::object();
  for (const auto& [path, layer] : model.linear_layers()) {
    if (const QuantizedWeight* q = layer->quantized_weight()) {
      state[path + ".weight"] = q->blocks;
      layers[path] = quant_name(q->format);
    }
  }
  ZENITH_CHECK(!layers.empty(), "[llama] save_quantized: no layer of the model is quantized");
  LlamaConfig config = model.config();
  config.torch_dtype = dtype_name(model.weight_dtype());
  config.extra[kQuantKey] = nlohmann::json{{"quant_method", "ggml"}, {"layers", layers}}.dump();
  io::save_hf_state(dir, state);
  save_llama_config(dir, config);
}

}  // namespace zenith::models
