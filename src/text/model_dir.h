// What a Hugging Face model directory says about its tokenizer besides the model file:
// tokenizer_config.json, special_tokens_map.json, generation_config.json.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "text/added_vocabulary.h"
#include "zenith/text.h"

namespace zenith::text::detail {

// A token named in a config file, with the file and key it came from (for errors).
struct NamedToken {
  std::string content;
  std::string source;  // "DIR/tokenizer_config.json: bos_token"
};

struct ModelDirConfig {
  std::string dir;
  std::optional<NamedToken> bos_token, eos_token, pad_token, unk_token;
  std::optional<bool> add_bos_token, add_eos_token;
  std::string chat_template;
  std::vector<AddedTokenSpec> added_tokens;  // tokenizer_config.json's added_tokens_decoder
  // generation_config.json
  std::optional<int32_t> bos_token_id, pad_token_id;
  std::vector<int32_t> eos_token_ids;
};

ModelDirConfig read_model_dir_config(const std::string& dir);

// Special ids: the config files' tokens (which must be in the vocabulary), then
// generation_config.json's ids, then the tokenizer's own defaults.
struct SpecialIds {
  int32_t bos = -1, eos = -1, pad = -1, unk = -1;
  std::vector<int32_t> eos_ids;  // eos first, then generation_config.json's others
};
SpecialIds resolve_special_ids(const ModelDirConfig& config, const Tokenizer& tokenizer,
                               const SpecialIds& defaults);

}  // namespace zenith::text::detail
