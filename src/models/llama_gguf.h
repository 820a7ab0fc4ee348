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

// Writes tokenizer_config.json and tokenizer.model (llama) or tokenizer.json (gpt2) for the
// file's keys into `dir`; false without tokenizer.ggml.model.
bool write_tokenizer_files(const io::gguf::File& file, const std::string& dir);

}  // namespace zenith::models::detail
