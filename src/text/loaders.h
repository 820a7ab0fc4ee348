// The two tokenizer implementations behind Tokenizer::from_dir.
#pragma once

#include <memory>
#include <string>

#include "text/model_dir.h"
#include "zenith/text.h"

namespace zenith::text::detail {

// DIR/tokenizer.json (model type BPE).
std::shared_ptr<Tokenizer> load_hf_tokenizer(const std::string& path, const ModelDirConfig& config);
// DIR/tokenizer.model (SentencePiece, any model type).
std::shared_ptr<Tokenizer> load_sentencepiece(const std::string& path,
                                              const ModelDirConfig& config);

// Fails naming the first byte of `text` that is not valid UTF-8.
void check_utf8(std::string_view text);

}  // namespace zenith::text::detail
