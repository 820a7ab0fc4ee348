// models::Llama in and out of Hugging Face model directories.
#include <filesystem>
#include <regex>

#include "core/allocator.h"
#include "models/llama_pages.h"
#include "zenith/gguf.h"
#include "zenith/llama.h"

namespace zenith::models {
namespace {

// A missing folder named like a Hub id ("TinyLlama/TinyLlama-1.1B-Chat-v1.0") fails saying that
// only local folders are read and how to bring one here, instead of "cannot open".
void check_local_dir(const std::string& dir) {
  if (std::filesystem::exists(dir)) return;
  static const std::regex hub_id(R"([A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*)");
  if (!std::regex_match(dir, hub_id)) return;  // the readers' own error names the path
  ZENITH_FAIL("[llama] no local folder ", dir,
              ": it looks like a Hugging Face Hub id, and zenith reads only local model folders "
              "(config.json, *.safetensors, tokenizer files); it downloads nothing. On a machine "
              "with internet run `huggingface-cli download ",
              dir, " --local-dir DIR` (or `git clone https://huggingface.co/", dir,
              "`), copy DIR here and pass its path");
}

// The model as the files hold it.
std::shared_ptr<Llama> read_pretrained(const std::string& dir, std::optional<DType> dtype) {
  if (is_gguf_file(dir)) return load_gguf(dir, dtype);  // a .gguf file (models/llama_gguf.cpp)
  check_local_dir(dir);
  LlamaConfig config = load_llama_config(dir);
  // Names and shapes from the headers first: a wrong file fails before any data is read.
  std::vector<io::TensorInfo> listing = io::list_hf_state(dir);
  check_llama_state(config, listing, dir);
  if (!dtype) return std::make_shared<Llama>(std::move(config), io::read_tensors(listing), dir);
  ZENITH_CHECK(is_floating(*dtype), "[llama] weights must be floating point, got ",
               dtype_name(*dtype));
  // Converted as each is read: the file's float32 state never exists whole beside the bf16 one,
  // and the float32 blocks go back to the system rather than to the allocator's cache.
  std::map<std::string, Tensor> weights;
  for (const io::TensorInfo& info : listing) {
    Tensor w = io::read_tensor(info);
    weights.emplace(info.name, w.dtype() == *dtype ? w : w.to(*dtype));
  }
  core::empty_allocator_cache();
  return std::make_shared<Llama>(std::move(config), std::move(weights), dir);
}

}  // namespace

std::shared_ptr<Llama> Llama::from_pretrained(const std::string& dir, std::optional<DType> dtype) {
  std::shared_ptr<Llama> model = read_pretrained(dir, dtype);
  place_weights_in_huge_pages(*model);  // decoding streams them: fewer TLB misses
  return model;
}

void Llama::save_pretrained(const std::string& dir, uint64_t max_shard_bytes) const {
  LlamaConfig config = config_;
  config.torch_dtype = dtype_name(weight_dtype());
  io::save_hf_state(dir, hf_state(), max_shard_bytes);
  save_llama_config(dir, config);
}

void copy_model_side_files(const std::string& from, const std::string& to) {
  namespace fs = std::filesystem;
  static const char* const kSideFiles[] = {"tokenizer.json", "tokenizer.model",
                                           "tokenizer_config.json", "special_tokens_map.json",
                                           "generation_config.json"};
  fs::create_directories(to);
  if (is_gguf_file(from)) {  // a llama.cpp file: its vocabulary as zenith's tokenizer files
    write_gguf_tokenizer_files(from, to);
    return;
  }
  for (const char* name : kSideFiles)
    if (fs::exists(fs::path(from) / name))
      fs::copy_file(fs::path(from) / name, fs::path(to) / name,
                    fs::copy_options::overwrite_existing);
}

}  // namespace zenith::models
