// Karpathy's llama2.c checkpoints (`.bin`, float32) and their conversion to a Hugging Face model
// directory.
//
// Version 0 (legacy): 7 int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size,
// seq_len; a negative vocab_size means an unshared classifier), then float32 token embeddings,
// rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3 (each for all layers), rms_final, the RoPE tables
// freq_cis_real/imag [seq_len, head_size / 2] (skipped) and the classifier if unshared.
// Version 1: uint32 magic 0x616b3432 ("ak42"), int32 version 1, the 7 int32, a uint8
// shared-classifier flag, zeros up to byte 256, then rms_att, rms_ffn, rms_final, token
// embeddings, wq, wk, wv, wo, w1, w2, w3 and the classifier if unshared.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "zenith/llama_config.h"
#include "zenith/tensor.h"

namespace zenith::io {

struct Llama2cHeader {
  int32_t version = 0;
  int32_t dim = 0, hidden_dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, vocab_size = 0,
          seq_len = 0;  // vocab_size is positive here
  bool shared_classifier = true;
};

struct Llama2cCheckpoint {
  Llama2cHeader header;
  // float32, under HF's names (model.layers.N.self_attn.q_proj.weight, ..., lm_head.weight when
  // unshared), q and k rows already in HF's rotary order.
  std::map<std::string, Tensor> tensors;
};

// Errors name the file and the header field: a bad magic or version, a non-positive or
// inconsistent size, a file whose length does not match its header (truncated).
Llama2cCheckpoint read_llama2c(const std::string& path);

// Meta's rotary pairs rows (2i, 2i+1) of each head; HF's rotate_half pairs rows (i, i + d/2).
// Reorders the rows of a q or k projection [n_heads * d, in] from the first to the second, as
// HF's convert_llama_weights_to_hf.py does:
//   w.view(n_heads, d / 2, 2, in).transpose(1, 2).reshape(n_heads * d, in)
Tensor rotary_interleaved_to_halves(const Tensor& w, int64_t n_heads);

}  // namespace zenith::io

namespace zenith::models {

// config.json for a llama2.c model: LlamaForCausalLM, rope_theta 10000, rms_norm_eps 1e-5,
// max_position_embeddings = seq_len, tie_word_embeddings = the shared flag.
LlamaConfig llama2c_config(const io::Llama2cHeader& header);

struct Llama2cConvertOptions {
  DType dtype = DType::f32;  // f32, bf16 or f16 (rounded to nearest even)
  uint64_t max_shard_bytes = io::kHfDefaultMaxShardBytes;
  std::string tokenizer = "";  // a SentencePiece tokenizer.model to copy along, or empty
};

// Reads `checkpoint` and writes an HF model directory `out_dir`: config.json, the weights
// (model.safetensors or shards + index) and tokenizer.model when given. Returns the config.
LlamaConfig convert_llama2c(const std::string& checkpoint, const std::string& out_dir,
                            const Llama2cConvertOptions& options = {});

}  // namespace zenith::models
