// models::Llama as GGUF (include/zenith/gguf.h): the llama architecture's keys and tensor names
// as llama.cpp's convert_hf_to_gguf.py writes them, and the Q/K row permutation. Hugging Face
// orders each head's rotary pairs as (first half, second half) of the head's rows; llama.cpp's
// rope rotates adjacent rows (2i, 2i + 1), so q_proj and k_proj rows are interleaved on export
// and put back on import.
#include "models/llama_gguf.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <regex>

#include "core/quant_x8.h"
#include "zenith/autograd.h"
#include "zenith/error.h"
#include "zenith/gguf.h"
#include "zenith/quant.h"

namespace zenith::models {
namespace {

namespace gguf = io::gguf;
using gguf::Value;

// llama_ftype of a file whose matrices are all of one type.
int64_t file_type_of(gguf::TensorType t) {
  switch (t) {
    case gguf::TensorType::f32:
      return 0;
    case gguf::TensorType::f16:
      return 1;
    case gguf::TensorType::q4_0:
      return 2;
    case gguf::TensorType::q8_0:
      return 7;
    case gguf::TensorType::q4_k:
      return 15;  // Q4_K_M
    case gguf::TensorType::bf16:
      return 32;
  }
  return 0;
}

// The GGUF name of an HF parameter name; "" for one llama.cpp does not have.
std::string gguf_name(const std::string& hf) {
  static const std::pair<const char*, const char*> layer_parts[] = {
      {"self_attn.q_proj", "attn_q"},          {"self_attn.k_proj", "attn_k"},
      {"self_attn.v_proj", "attn_v"},          {"self_attn.o_proj", "attn_output"},
      {"mlp.gate_proj", "ffn_gate"},           {"mlp.up_proj", "ffn_up"},
      {"mlp.down_proj", "ffn_down"},           {"input_layernorm", "attn_norm"},
      {"post_attention_layernorm", "ffn_norm"}};
  if (hf == "model.embed_tokens.weight") return "token_embd.weight";
  if (hf == "model.norm.weight") return "output_norm.weight";
  if (hf == "lm_head.weight") return "output.weight";
  static const std::regex layer(R"(model\.layers\.(\d+)\.(.+)\.(weight|bias))");
  std::smatch m;
  if (!std::regex_match(hf, m, layer)) return "";
  for (const auto& [from, to] : layer_parts)
    if (m[2] == from) return "blk." + m[1].str() + "." + to + "." + m[3].str();
  return "";
}

// Rows of each of `heads` heads reordered: HF (two, half) -> llama.cpp (half, two), or back.
Tensor permute_rows(const Tensor& w, int64_t heads, bool to_gguf) {
  NoGradGuard no_grad;
  const int64_t rows = w.size(0), half = rows / heads / 2;
  Shape shape = w.shape();
  Shape split = {heads, to_gguf ? 2 : half, to_gguf ? half : 2};
  for (int64_t d = 1; d < w.dim(); ++d) split.push_back(w.size(d));
  return w.contiguous().view(split).transpose(1, 2).contiguous().view(shape);
}

bool is_rotary_projection(const std::string& hf, bool* is_q) {
  *is_q = hf.find("self_attn.q_proj.") != std::string::npos;
  return *is_q || hf.find("self_attn.k_proj.") != std::string::npos;
}

gguf::TensorType tensor_type_of(QuantFormat f) {
  return f == QuantFormat::q8_0   ? gguf::TensorType::q8_0
         : f == QuantFormat::q4_0 ? gguf::TensorType::q4_0
                                  : gguf::TensorType::q4_k;
}

std::optional<QuantFormat> quant_format_of(uint32_t t) {
  switch (gguf::TensorType(t)) {
    case gguf::TensorType::q8_0:
      return QuantFormat::q8_0;
    case gguf::TensorType::q4_0:
      return QuantFormat::q4_0;
    case gguf::TensorType::q4_k:
      return QuantFormat::q4_k;
    default:
      return std::nullopt;
  }
}

// The format a linear layer with `in` inputs takes when `f` is asked for (as Llama::quantize
// chooses): q4_k needs rows of whole 256-blocks, else q4_0; a row of no whole 32-block stays
// float.
std::optional<QuantFormat> layer_format(QuantFormat f, int64_t in) {
  if (in % quant_block_elems(f) == 0) return f;
  if (f == QuantFormat::q4_k && in % 32 == 0) return QuantFormat::q4_0;
  return std::nullopt;
}

gguf::TensorType tensor_type_for(const std::string& dtype) {
  if (dtype == "f32") return gguf::TensorType::f32;
  if (dtype == "f16") return gguf::TensorType::f16;
  if (dtype == "bf16") return gguf::TensorType::bf16;
  if (dtype == "q8_0") return gguf::TensorType::q8_0;
  if (dtype == "q4_0") return gguf::TensorType::q4_0;
  if (dtype == "q4_k") return gguf::TensorType::q4_k;
  std::string known;
  for (const auto& d : gguf_dtypes()) known += (known.empty() ? "" : ", ") + d;
  ZENITH_FAIL("[gguf] unknown --dtype '", dtype, "' (known: ", known, ")");
}

DType dtype_of(gguf::TensorType t) {
  return t == gguf::TensorType::f16    ? DType::f16
         : t == gguf::TensorType::bf16 ? DType::bf16
                                       : DType::f32;
}

void check_exportable(const LlamaConfig& c) {
  ZENITH_CHECK(!c.qkv_bias() || c.model_type != "qwen2", "[gguf] ", c.architecture,
               " (model_type qwen2) is not written as GGUF yet: only llama.cpp's llama "
               "architecture (LLaMA, Mistral, TinyLlama, SmolLM)");
  ZENITH_CHECK(!c.mlp_bias,
               "[gguf] llama.cpp's llama architecture has no MLP biases "
               "(config.json mlp_bias is true)");
  ZENITH_CHECK(c.rope_scaling.type != RopeScaling::Type::llama3,
               "[gguf] rope_scaling llama3 is not written as GGUF yet (supported: none, linear)");
}

}  // namespace

std::vector<std::string> gguf_dtypes() { return {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_k"}; }

GgufExportSummary save_gguf(const Llama& model, const text::Tokenizer* tokenizer,
                            const std::string& path, const GgufExportOptions& options) {
  const LlamaConfig& c = model.config();
  check_exportable(c);
  const gguf::TensorType file_type = tensor_type_for(options.dtype);
  const std::optional<QuantFormat> quant = quant_format_of(uint32_t(file_type));
  // Matrices not quantized (the embedding, layers of no whole block) keep the model's dtype.
  const gguf::TensorType matrix_type = !quant ? file_type
                                       : model.weight_dtype() == DType::bf16
                                           ? gguf::TensorType::bf16
                                       : model.weight_dtype() == DType::f16 ? gguf::TensorType::f16
                                                                            : gguf::TensorType::f32;
  detail::GgufMetadata kv;
  auto u32 = [&](const std::string& k, int64_t v) { kv.emplace_back(k, Value::u32(uint32_t(v))); };
  auto f32 = [&](const std::string& k, double v) { kv.emplace_back(k, Value::f32(v)); };
  kv.emplace_back("general.architecture", Value::str("llama"));
  kv.emplace_back("general.type", Value::str("model"));
  if (!options.name.empty()) kv.emplace_back("general.name", Value::str(options.name));
  u32("llama.block_count", c.num_hidden_layers);
  u32("llama.context_length", c.max_position_embeddings);
  u32("llama.embedding_length", c.hidden_size);
  u32("llama.feed_forward_length", c.intermediate_size);
  u32("llama.attention.head_count", c.num_attention_heads);
  u32("llama.attention.head_count_kv", c.num_key_value_heads);
  f32("llama.rope.freq_base", c.rope_theta);
  f32("llama.attention.layer_norm_rms_epsilon", c.rms_norm_eps);
  if (c.head_dim * c.num_attention_heads != c.hidden_size) {
    u32("llama.attention.key_length", c.head_dim);
    u32("llama.attention.value_length", c.head_dim);
  }
  if (c.rope_scaling.type == RopeScaling::Type::linear) {
    kv.emplace_back("llama.rope.scaling.type", Value::str("linear"));
    f32("llama.rope.scaling.factor", c.rope_scaling.factor);
  }
  // A model holding blocks already (loaded quantized) is of their type.
  gguf::TensorType kind = file_type;
  for (const auto& [module, layer] : model.linear_layers())
    if (const QuantizedWeight* q = layer->quantized_weight(); q && !quant) {
      kind = tensor_type_of(q->format);
      break;
    }
  u32("general.file_type", file_type_of(kind));
  u32("llama.vocab_size", c.vocab_size);
  u32("llama.rope.dimension_count", c.head_dim);
  u32("general.quantization_version", 2);
  GgufExportSummary summary;
  if (tokenizer) {
    const std::string dir =
        options.tokenizer_dir.empty() ? tokenizer->dir() : options.tokenizer_dir;
    summary.vocabulary = detail::append_gguf_vocab(kv, *tokenizer, dir, c.vocab_size);
  }

  // Tensors in model order (expected_llama_parameters), as the converter writes them.
  const std::map<std::string, Tensor> state = model.hf_state();
  std::map<std::string, const QuantizedWeight*> quantized;  // by weight name
  for (const auto& [module, layer] : model.linear_layers())
    if (const QuantizedWeight* q = layer->quantized_weight()) quantized[module + ".weight"] = q;
  std::vector<gguf::OutTensor> tensors;
  NoGradGuard no_grad;
  for (const ParameterSpec& spec : expected_llama_parameters(c)) {
    const std::string name = gguf_name(spec.name);
    bool is_q = false;
    const bool rotary = is_rotary_projection(spec.name, &is_q);
    const int64_t heads = is_q ? c.num_attention_heads : c.num_key_value_heads;
    const bool linear = spec.shape.size() == 2 && spec.name != "model.embed_tokens.weight";
    // Blocks: the layer's own (loaded or quantized before), or the float weight quantized now;
    // Q/K block rows reordered like float rows (a block never spans two rows).
    std::optional<QuantizedWeight> blocks;
    if (auto q = quantized.find(spec.name); q != quantized.end()) {
      blocks = quant_to_ggml(*q->second);  // GGML's bytes, unpacked if held interleaved
    } else if (auto f = quant && linear ? layer_format(*quant, spec.shape[1]) : std::nullopt) {
      blocks = quantize_weight(state.at(spec.name), *f);
    }
    if (blocks) {
      Tensor b = rotary ? permute_rows(blocks->blocks, heads, true) : blocks->blocks;
      tensors.push_back(
          {name, {blocks->in_features, blocks->out_features}, tensor_type_of(blocks->format), b});
      continue;
    }
    auto it = state.find(spec.name);
    if (it == state.end()) continue;  // lm_head of a tied model
    ZENITH_CHECK(!name.empty(), "[gguf] ", spec.name,
                 " has no GGUF name in llama.cpp's llama "
                 "architecture");
    Tensor w = it->second;
    if (rotary) w = permute_rows(w, heads, true);
    // Norms and biases (1-D) stay float32, as llama.cpp's converter keeps them.
    const gguf::TensorType type = w.dim() == 1 ? gguf::TensorType::f32 : matrix_type;
    if (w.dtype() != dtype_of(type)) w = w.to(dtype_of(type));
    const Shape& s = w.shape();
    tensors.push_back({name, std::vector<int64_t>(s.rbegin(), s.rend()), type, w});
  }
  summary.tensors = int64_t(tensors.size());
  summary.metadata_keys = int64_t(kv.size());
  gguf::write_file(path, kv, tensors);
  return summary;
}

bool is_gguf_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  char magic[4] = {};
  const bool yes = std::fread(magic, 1, 4, f) == 4 && std::memcmp(magic, "GGUF", 4) == 0;
  std::fclose(f);
  return yes;
}

namespace {

LlamaConfig config_of(const gguf::File& f) {
  const std::string arch = f.get_string("general.architecture");
  ZENITH_CHECK(arch == "llama", "[gguf] ", f.path, ": general.architecture is '", arch,
               "'; zenith reads the llama architecture only (LLaMA, Mistral, TinyLlama, SmolLM)");
  const std::string type = f.get_string("general.type", "model");
  ZENITH_CHECK(type == "model", "[gguf] ", f.path, ": general.type is '", type,
               "', not a model (a LoRA adapter goes with --adapter on its base)");
  LlamaConfig c;
  c.architecture = "LlamaForCausalLM";
  c.model_type = "llama";
  c.num_hidden_layers = f.get_int("llama.block_count");
  c.hidden_size = f.get_int("llama.embedding_length");
  c.intermediate_size = f.get_int("llama.feed_forward_length");
  c.num_attention_heads = f.get_int("llama.attention.head_count");
  c.num_key_value_heads = f.get_int("llama.attention.head_count_kv", c.num_attention_heads);
  c.max_position_embeddings = f.get_int("llama.context_length", 2048);
  c.rms_norm_eps = f.get_float("llama.attention.layer_norm_rms_epsilon", 1e-5);
  c.rope_theta = f.get_float("llama.rope.freq_base", 10000);
  // Each layer has tensors in the file, and no size needs more than 2^24 (a hostile file's
  // huge counts fail here, before anything is allocated for them).
  constexpr int64_t kMaxSize = int64_t(1) << 24;
  ZENITH_CHECK(c.num_hidden_layers > 0 && c.hidden_size > 0 && c.num_attention_heads > 0 &&
                   c.num_key_value_heads > 0 && c.intermediate_size > 0 &&
                   c.num_attention_heads % c.num_key_value_heads == 0 &&
                   c.num_hidden_layers <= int64_t(f.tensors.size()) && c.hidden_size <= kMaxSize &&
                   c.intermediate_size <= kMaxSize && c.num_attention_heads <= c.hidden_size,
               "[gguf] ", f.path, ": llama.* sizes out of range (block_count ", c.num_hidden_layers,
               ", embedding_length ", c.hidden_size, ", head_count ", c.num_attention_heads,
               ", head_count_kv ", c.num_key_value_heads, ")");
  c.head_dim = f.get_int("llama.attention.key_length", c.hidden_size / c.num_attention_heads);
  ZENITH_CHECK(c.head_dim > 0 && c.head_dim % 2 == 0 && c.head_dim <= kMaxSize &&
                   f.get_int("llama.attention.value_length", c.head_dim) == c.head_dim &&
                   f.get_int("llama.rope.dimension_count", c.head_dim) == c.head_dim,
               "[gguf] ", f.path, ": head size ", c.head_dim,
               " must be even and equal value_length and rope.dimension_count");
  const std::string scaling = f.get_string("llama.rope.scaling.type", "none");
  if (scaling == "linear") {
    c.rope_scaling.type = RopeScaling::Type::linear;
    c.rope_scaling.factor = f.get_float("llama.rope.scaling.factor", 1);
  } else {
    ZENITH_CHECK(scaling == "none", "[gguf] ", f.path, ": llama.rope.scaling.type '", scaling,
                 "' is not supported (supported: none, linear)");
  }
  ZENITH_CHECK(!f.find_tensor("rope_freqs.weight"), "[gguf] ", f.path,
               ": rope_freqs.weight (llama3 rope scaling) is not supported");
  const gguf::TensorEntry* embd = f.find_tensor("token_embd.weight");
  ZENITH_CHECK(embd && embd->ne.size() == 2, "[gguf] ", f.path,
               ": tensor token_embd.weight [vocab, embedding_length] is missing");
  c.vocab_size = f.get_int("llama.vocab_size", embd->ne[1]);
  ZENITH_CHECK(c.vocab_size == embd->ne[1], "[gguf] ", f.path, ": llama.vocab_size ", c.vocab_size,
               " differs from token_embd.weight's ", embd->ne[1], " rows");
  c.tie_word_embeddings = f.find_tensor("output.weight") == nullptr;
  c.attention_bias = f.find_tensor("blk.0.attn_q.bias") != nullptr;
  c.bos_token_id = std::nullopt;
  if (f.find("tokenizer.ggml.bos_token_id"))
    c.bos_token_id = f.get_int("tokenizer.ggml.bos_token_id");
  c.eos_token_ids.clear();
  if (f.find("tokenizer.ggml.eos_token_id"))
    c.eos_token_ids.push_back(f.get_int("tokenizer.ggml.eos_token_id"));
  if (f.find("tokenizer.ggml.padding_token_id"))
    c.pad_token_id = f.get_int("tokenizer.ggml.padding_token_id");
  return c;
}

}  // namespace

LlamaConfig gguf_llama_config(const std::string& path) { return config_of(gguf::read_file(path)); }

std::shared_ptr<Llama> load_gguf(const std::string& path, std::optional<DType> dtype,
                                 bool dequantize) {
  const gguf::File f = gguf::read_file(path);
  LlamaConfig c = config_of(f);
  // The matrices' type decides the dtype norms come back in (they are written as f32).
  DType matrix_dtype = DType::f32;
  if (const gguf::TensorEntry* e = f.find_tensor("token_embd.weight");
      e && gguf::is_known_tensor_type(e->type))
    matrix_dtype = dtype_of(gguf::TensorType(e->type));
  std::map<std::string, Tensor> weights;
  std::map<std::string, QuantizedWeight> blocks;  // by module path
  for (const ParameterSpec& spec : expected_llama_parameters(c)) {
    if (spec.name == "lm_head.weight" && c.tie_word_embeddings) continue;
    const std::string name = gguf_name(spec.name);
    const gguf::TensorEntry* e = f.find_tensor(name);
    ZENITH_CHECK(e, "[gguf] ", path, ": tensor ", name, " (", spec.name, ") is missing");
    ZENITH_CHECK(e->shape() == spec.shape, "[gguf] ", path, ": tensor ", name, " has shape ",
                 shape_str(e->shape()), ", the metadata needs ", shape_str(spec.shape));
    ZENITH_CHECK(gguf::is_known_tensor_type(e->type), "[gguf] ", path, ": tensor ", name,
                 " is of ggml ", gguf::tensor_type_name(e->type),
                 "; zenith reads f32, f16, bf16, q8_0, q4_0 and q4_K tensors");
    bool is_q = false;
    const bool rotary = is_rotary_projection(spec.name, &is_q);
    const int64_t heads = is_q ? c.num_attention_heads : c.num_key_value_heads;
    const std::optional<QuantFormat> format = quant_format_of(e->type);
    if (format && !dequantize && spec.name != "model.embed_tokens.weight") {
      // A linear layer's blocks, installed unchanged once the model exists; until then a
      // stand-in of the float shape that holds no memory.
      const std::string bytes = gguf::read_tensor_bytes(f, *e);
      const int64_t out = spec.shape[0], in = spec.shape[1];
      Tensor b = Tensor::empty({out, quant_row_bytes(*format, in)}, DType::u8);
      ZENITH_CHECK(b.nbytes() == bytes.size(), "[gguf] ", path, ": tensor ", name, " has ",
                   bytes.size(), " bytes, expected ", b.nbytes());
      std::memcpy(b.raw_data(), bytes.data(), bytes.size());
      if (rotary) b = permute_rows(b, heads, false);
      blocks[spec.name.substr(0, spec.name.rfind('.'))] = {b, *format, out, in};
      weights.emplace(spec.name, Tensor::zeros({1, 1}).expand({out, in}));
      continue;
    }
    Tensor w;
    if (format) {  // a quantized embedding (zenith's embedding is float), or widened on request
      const std::string bytes = gguf::read_tensor_bytes(f, *e);
      Tensor b = Tensor::empty({spec.shape[0], quant_row_bytes(*format, spec.shape[1])}, DType::u8);
      std::memcpy(b.raw_data(), bytes.data(), std::min(bytes.size(), b.nbytes()));
      w = dequantize_weight({b, *format, spec.shape[0], spec.shape[1]});
    } else {
      w = gguf::read_tensor(f, *e);
    }
    if (rotary) w = permute_rows(w, heads, false);
    const DType want = dtype ? *dtype : (w.dim() == 1 || format ? matrix_dtype : w.dtype());
    if (w.dtype() != want) {
      NoGradGuard no_grad;
      w = w.to(want);
    }
    weights.emplace(spec.name, std::move(w));
  }
  c.torch_dtype = dtype_name(dtype ? *dtype : matrix_dtype);
  auto model = std::make_shared<Llama>(std::move(c), std::move(weights), path);
  for (auto& [module, w] : blocks) model->set_quantized_weight(module, std::move(w));
  return model;
}

bool write_gguf_tokenizer_files(const std::string& path, const std::string& dir) {
  return detail::write_tokenizer_files(gguf::read_file(path), dir);
}

namespace detail {
std::string gguf_tensor_name(const std::string& hf_name) { return gguf_name(hf_name); }
Tensor permute_rotary_rows(const Tensor& w, int64_t heads, bool to_gguf) {
  return permute_rows(w, heads, to_gguf);
}
}  // namespace detail

}  // namespace zenith::models
