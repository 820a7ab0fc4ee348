// llama2.c checkpoint -> Hugging Face model directory (config.json, safetensors weights,
// tokenizer.model).
#include <filesystem>

#include "core/atomic_file.h"
#include "zenith/autograd.h"
#include "zenith/llama2c.h"

namespace zenith::models {

LlamaConfig llama2c_config(const io::Llama2cHeader& h) {
  LlamaConfig c;
  c.architecture = "LlamaForCausalLM";
  c.model_type = "llama";
  c.vocab_size = h.vocab_size;
  c.hidden_size = h.dim;
  c.intermediate_size = h.hidden_dim;
  c.num_hidden_layers = h.n_layers;
  c.num_attention_heads = h.n_heads;
  c.num_key_value_heads = h.n_kv_heads;
  c.head_dim = h.dim / h.n_heads;
  c.max_position_embeddings = h.seq_len;
  c.rms_norm_eps = 1e-5;  // llama2.c's ModelArgs.norm_eps
  c.rope_theta = 10000;   // llama2.c's precompute_freqs_cis
  c.tie_word_embeddings = h.shared_classifier;
  c.torch_dtype = "float32";
  c.bos_token_id = 1;  // the Llama 2 SentencePiece ids llama2.c's tokenizers keep
  c.eos_token_ids = {2};
  return c;
}

LlamaConfig convert_llama2c(const std::string& checkpoint, const std::string& out_dir,
                            const Llama2cConvertOptions& options) {
  NoGradGuard no_grad;
  const DType dtype = options.dtype;
  ZENITH_CHECK(dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16,
               "[convert] --dtype must be f32, bf16 or f16, got ", dtype_name(dtype));
  ZENITH_CHECK(options.tokenizer.empty() || std::filesystem::is_regular_file(options.tokenizer),
               "[convert] tokenizer ", options.tokenizer, " is not a file");
  io::Llama2cCheckpoint ck = io::read_llama2c(checkpoint);
  LlamaConfig config = llama2c_config(ck.header);
  config.torch_dtype = dtype == DType::bf16  ? "bfloat16"
                       : dtype == DType::f16 ? "float16"
                                             : "float32";
  for (auto& [name, t] : ck.tensors) t = t.to(dtype);  // one tensor at a time: no second copy
  check_llama_state(config, ck.tensors, checkpoint);

  std::filesystem::create_directories(out_dir);
  io::save_hf_state(out_dir, ck.tensors, options.max_shard_bytes);
  save_llama_config(out_dir, config);
  if (!options.tokenizer.empty())
    core::write_file_atomic((std::filesystem::path(out_dir) / "tokenizer.model").string(),
                            core::read_file(options.tokenizer, "convert"));
  return config;
}

}  // namespace zenith::models
