// The vocabulary half of GGUF export and import (src/models/llama_gguf_vocab.cpp).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "io/gguf_file.h"
#include "zenith/text.h"

namespace zenith::models::detail {

using GgufMetadata = std::vector<std::pair<std::string, io::gguf::Value>>;

// Appends the tokenizer.ggml.* keys and tokenizer.chat_template for `tokenizer`, padded with
// unused "[PADn]" tokens up to `vocab_size` (as llama.cpp's converter pads); returns a
// description ("llama (SentencePiece), 2048 tokens").
std::string append_gguf_vocab(GgufMetadata& kv, const text::Tokenizer& tokenizer,
                              const std::string& tokenizer_dir, int64_t vocab_size);

// The GGUF name of an HF parameter ("model.layers.0.self_attn.q_proj.weight" ->
// "blk.0.attn_q.weight"); "" for one llama.cpp's llama architecture does not have.
std::string gguf_tensor_name(const std::string& hf_name);
// Rows of each of `heads` heads between HF's rotary order and llama.cpp's (to_gguf) or back.
Tensor permute_rotary_rows(const Tensor& w, int64_t heads, bool to_gguf);

// Writes tokenizer_config.json and tokenizer.model (llama) or tokenizer.json (gpt2) for the
// file's keys into `dir`; false without tokenizer.ggml.model.
bool write_tokenizer_files(const io::gguf::File& file, const std::string& dir);

}  // namespace zenith::models::detail
