// tokenizer.json "pre_tokenizer": splits normalized text into the words BPE runs on (Split with
// a regex, ByteLevel, Metaspace, Digits, Whitespace, WhitespaceSplit, Sequence).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace zenith::text::detail {

struct Piece {
  std::string text;
  bool at_start = false;  // begins at the start of the input text (Metaspace "first")
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces each piece by its parts (dropping empty ones).
  virtual void apply(std::vector<Piece>& pieces) const = 0;
};

// Null for a JSON null; `where` names the file and key in errors.
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& config,
                                                 const std::string& where);

// GPT-2's pre-tokenizer regex (tokenizers' ByteLevel with use_regex).
extern const char* const kGpt2Pattern;

}  // namespace zenith::text::detail
