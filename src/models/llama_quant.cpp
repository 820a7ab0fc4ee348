// models::Llama with quantized linear layers (GGML's blocks, include/zenith/quant.h): quantizing
// at load, installing blocks read from a file, and the safetensors directory `zenith quantize`
// writes (blocks as U8 tensors, config.json's quantization_config naming each layer's format),
// and QLoRA's base quantized weight by weight as the file is read (models/llama_quant.h).
#include "models/llama_quant.h"

#include <malloc.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/allocator.h"
#include "core/quant_x8.h"
#include "models/llama_pages.h"
#include "zenith/gguf.h"
#include "zenith/hf.h"

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

// A quantized layer's weight until its blocks replace it: the float shape, allocated and never
// written, so none of its pages becomes resident (a broadcast stand-in would be made contiguous,
// and so written, by the model's constructor).
Tensor stand_in(const Shape& shape) { return Tensor::empty(shape, DType::f32); }

// The module path of a linear layer's weight ("model.layers.0.mlp.up_proj" of
// "model.layers.0.mlp.up_proj.weight"; "lm_head"), or "" for any other tensor.
std::string linear_path(const io::TensorInfo& info) {
  static const std::string suffix = ".weight";
  const std::string& n = info.name;
  if (info.shape.size() != 2 || n == "model.embed_tokens.weight" || n.size() <= suffix.size() ||
      n.compare(n.size() - suffix.size(), suffix.size(), suffix) != 0)
    return "";
  return n.substr(0, n.size() - suffix.size());
}

std::shared_ptr<Llama> with_blocks(LlamaConfig config, std::map<std::string, Tensor> weights,
                                   std::map<std::string, QuantizedWeight> blocks,
                                   const std::string& dir) {
  auto model = std::make_shared<Llama>(std::move(config), std::move(weights), dir);
  for (auto& [path, w] : blocks) model->set_quantized_weight(path, std::move(w));
  release_free_memory();  // the stand-ins' address space
  place_weights_in_huge_pages(*model);
  return model;
}

}  // namespace

void release_free_memory() {
  core::empty_allocator_cache();
  ::malloc_trim(0);
}

std::shared_ptr<Llama> load_quantizing(const std::string& dir, const std::string& format_name,
                                       std::optional<DType> dtype) {
  if (format_name.empty()) return Llama::from_pretrained(dir, dtype);
  const QuantFormat format = quant_from_name(format_name);
  if (is_gguf_file(dir)) {
    auto model = Llama::from_pretrained(dir, dtype);
    model->quantize(format);
    return model;
  }
  ZENITH_CHECK(!dtype || is_floating(*dtype), "[llama] weights must be floating point, got ",
               dtype_name(*dtype));
  LlamaConfig config = load_llama_config(dir);
  const std::vector<io::TensorInfo> listing = io::list_hf_state(dir);
  check_llama_state(config, listing, dir);  // a wrong file fails before any data is read
  // The stand-ins first, while the address space they take is fresh (mmap'd by glibc, never
  // touched); a stand-in placed after a float weight is freed could reuse its resident pages.
  core::empty_allocator_cache();
  std::map<std::string, Tensor> weights;
  std::map<std::string, QuantFormat> formats;
  for (const io::TensorInfo& info : listing) {
    const std::string path = linear_path(info);
    if (path.empty()) continue;
    if (std::optional<QuantFormat> f = layer_format(format, info.shape[1])) {
      formats.emplace(path, *f);
      weights.emplace(info.name, stand_in(info.shape));
    }
  }
  std::map<std::string, QuantizedWeight> blocks;
  for (const io::TensorInfo& info : listing) {
    Tensor w = io::read_tensor(info);
    auto f = formats.find(linear_path(info));
    if (f != formats.end()) {
      blocks[f->first] = quantize_weight(w, f->second);
      w = Tensor();
      core::empty_allocator_cache();  // the float weight goes back to the system
    } else {
      weights.emplace(info.name, dtype && w.dtype() != *dtype ? w.to(*dtype) : w);
    }
  }
  return with_blocks(std::move(config), std::move(weights), std::move(blocks), dir);
}

std::map<std::string, QuantFormat> Llama::quantize(QuantFormat format) {
  std::map<std::string, QuantFormat> out;
  for (const auto& [path, layer] : linear_layers()) {
    if (auto f = layer_format(format, layer->in_features())) {
      layer->quantize(*f);
      out.emplace(path, *f);
    }
  }
  release_free_memory();  // the float weights go back to the system
  place_weights_in_huge_pages(*this);
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
  // Each quantized layer's weight name gets a stand-in of the float shape until its blocks
  // replace it.
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
    it->second = stand_in({b.size(0), in});
  }
  return with_blocks(std::move(config), std::move(weights), std::move(blocks), dir);
}

int64_t pack_for_inference(Llama& model) {
  int64_t bytes = 0;
  for (const auto& [path, layer] : model.linear_layers()) {
    const QuantizedWeight* q = layer->quantized_weight();
    if (!q || quant_is_x8(*q) || !quant_x8_preferred(q->format, q->out_features)) continue;
    QuantizedWeight packed = quant_to_x8_in_place(*q);  // in the loader's pages where it can
    bytes += int64_t(packed.blocks.nbytes());
    layer->set_quantized_weight(std::move(packed));  // GGML's blocks freed if it copied
  }
  if (bytes > 0) release_free_memory();
  return bytes;
}

void save_quantized(const Llama& model, const std::string& dir) {
  std::map<std::string, Tensor> state = model.hf_state();
  nlohmann::json layers = nlohmann::json::object();
  for (const auto& [path, layer] : model.linear_layers()) {
    if (const QuantizedWeight* q = layer->quantized_weight()) {
      state[path + ".weight"] = quant_to_ggml(*q).blocks;  // GGML's bytes if packed
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
