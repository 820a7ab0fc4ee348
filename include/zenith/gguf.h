// LLaMA-family models as GGUF files, the format of llama.cpp and Ollama (docs/gguf.md): written
// as llama.cpp's convert_hf_to_gguf.py writes them (metadata keys, tensor names, the Q/K row
// order llama.cpp's rotary embedding expects, the vocabulary with scores and token types, the
// chat template) and read back into models::Llama.
//
//   auto model = models::Llama::from_pretrained("fortunes-llama");
//   auto tok = text::Tokenizer::from_dir("fortunes-llama");
//   models::save_gguf(*model, tok.get(), "fortunes.gguf", {.dtype = "f16"});
//   auto back = models::load_gguf("fortunes.gguf");        // or Llama::from_pretrained(path)
//   auto tok2 = models::gguf_tokenizer("fortunes.gguf");   // the vocabulary the file carries
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "zenith/error.h"
#include "zenith/llama.h"
#include "zenith/text.h"

namespace zenith::models {

// The tensor types export writes (GGUF's names): f32, f16, bf16 (norms stay f32, as llama.cpp's
// converter keeps them).
std::vector<std::string> gguf_dtypes();

struct GgufExportOptions {
  std::string dtype = "f32";  // one of gguf_dtypes()
  std::string name;           // general.name; empty: none
  // tokenizer.model (SentencePiece: scores and token types) and tokenizer.json (byte-level
  // BPE: merges) are read from here; empty: the tokenizer's dir().
  std::string tokenizer_dir;
};

struct GgufExportSummary {
  int64_t tensors = 0;
  int64_t metadata_keys = 0;
  std::string vocabulary;  // "llama (SentencePiece), 2048 tokens", "gpt2 (byte-level BPE), ..."
};

// Writes `model` (adapters must be merged first) and, when given, its tokenizer as a GGUF v3
// file, atomically. Errors name what llama.cpp's llama architecture cannot hold (Qwen2's
// biases, llama3 rope scaling) and a dtype outside gguf_dtypes().
GgufExportSummary save_gguf(const Llama& model, const text::Tokenizer* tokenizer,
                            const std::string& path, const GgufExportOptions& options = {});

// A PEFT LoRA adapter of `base` as a GGUF adapter file, the way llama.cpp's
// convert_lora_to_gguf.py writes it (general.type adapter, adapter.type lora, adapter.lora.alpha,
// blk.N.<tensor>.weight.lora_a [r, in] and .lora_b [out, r], float32; lora_b rows of q and k in
// llama.cpp's rotary order). llama.cpp scales by alpha / r: an rsLoRA adapter's alpha is written
// as alpha * sqrt(r), so the scaling is the same. Returns the number of tensors.
int64_t save_gguf_adapter(const io::LoraAdapter& adapter, const LlamaConfig& base,
                          const std::string& path);
// A GGUF LoRA adapter file of `base` (as save_gguf_adapter or convert_lora_to_gguf.py write it)
// as zenith's adapter: r from the tensors, lora_alpha from adapter.lora.alpha (scaling alpha /
// r, as llama.cpp applies it), target_modules the adapted layers' names, lora_b rows of q and k
// back in HF's order. Errors name the file: not an adapter (general.type), a tensor the base
// does not have, a missing half, unequal ranks, shapes that do not fit the base.
io::LoraAdapter load_gguf_adapter(const std::string& path, const LlamaConfig& base);
// load_gguf_adapter for a GGUF file, else io::load_lora_adapter (a PEFT directory).
io::LoraAdapter read_lora_adapter(const std::string& path, const LlamaConfig& base);

// Whether `path` is a GGUF file (its first four bytes are "GGUF").
bool is_gguf_file(const std::string& path);
// The model in a GGUF file of architecture llama: Q/K rows back in Hugging Face's order, each
// tensor in its file dtype (f32, f16, bf16; f32 norms take the matrices' dtype, so a round trip
// is bit for bit) unless `dtype` is given. GGML blocks (q8_0, q4_0, q4_K) stay blocks in their
// linear layers unless `dequantize`: then every weight is widened to float (`dtype`, else f32),
// as full fine-tuning needs. Errors name the file and the unsupported architecture or tensor
// type, a missing key or tensor, a shape that does not fit the metadata.
std::shared_ptr<Llama> load_gguf(const std::string& path, std::optional<DType> dtype = std::nullopt,
                                 bool dequantize = false);
// The config the file's metadata describes.
LlamaConfig gguf_llama_config(const std::string& path);
// Writes the files zenith's tokenizers read (tokenizer.model for llama, tokenizer.json for gpt2,
// and tokenizer_config.json) for the file's tokenizer.ggml.* keys into `dir`; false when the
// file has no vocabulary.
bool write_gguf_tokenizer_files(const std::string& path, const std::string& dir);

// The tokenizer the file's tokenizer.ggml.* keys describe (llama: SentencePiece; gpt2:
// byte-level BPE), or null when it has none. Inline: the tokenizers live in libzenith_text,
// which links libzenith, not the other way round.
inline std::shared_ptr<text::Tokenizer> gguf_tokenizer(const std::string& path) {
  namespace fs = std::filesystem;
  std::string dir = (fs::temp_directory_path() / "zenith-gguf-vocab-XXXXXX").string();
  ZENITH_CHECK(::mkdtemp(dir.data()), "[gguf] cannot create a temporary directory ", dir);
  struct Remove {
    std::string p;
    ~Remove() {
      std::error_code ec;
      fs::remove_all(p, ec);
    }
  } remove{dir};
  if (!write_gguf_tokenizer_files(path, dir)) return nullptr;
  return text::Tokenizer::from_dir(dir);
}
// For the LLM commands: a GGUF file's tokenizer, else Tokenizer::find_in_dir(path).
inline std::shared_ptr<text::Tokenizer> find_model_tokenizer(const std::string& path) {
  if (is_gguf_file(path)) return gguf_tokenizer(path);
  return text::Tokenizer::find_in_dir(path);
}

}  // namespace zenith::models
