// tokenizer.json "decoder": token strings back to bytes (ByteLevel, ByteFallback, Metaspace,
// Replace, Strip, Fuse, Sequence), one token at a time so that streaming and whole-text decoding
// agree. Steps after Fuse see the joined text: only Strip of leading characters is allowed there.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "zenith/text.h"

namespace zenith::text::detail {

class TokenDecoder {
 public:
  // A JSON null: tokens are joined with spaces (as tokenizers does without a decoder).
  TokenDecoder(const nlohmann::json& config, const std::string& where);

  // Appends the bytes of `token` (its vocabulary string) at `state`.
  void append(std::string_view token, DecodeState& state, std::string& out) const;
  // Whether the bytes are byte-level (lossy UTF-8 per maximal subpart) rather than byte fallback.
  bool byte_level() const { return byte_level_; }

 private:
  enum class Kind { kReplace, kByteFallback, kByteLevel, kMetaspace, kStrip };
  struct Step {
    explicit Step(Kind k) : kind(k) {}
    Kind kind;
    std::string from, to;      // Replace; Metaspace: from = the replacement character
    bool strip_first = false;  // Metaspace: the first token loses its replacement characters
    std::string content;       // Strip
    int start = 0, stop = 0;   // Strip
  };
  void add(const nlohmann::json& config, const std::string& where, bool& fused);

  std::vector<Step> steps_;
  bool join_with_spaces_ = false, byte_level_ = false;
  std::string strip_content_;  // Strip after Fuse: leading characters of the whole text
  int strip_start_ = 0;
};

}  // namespace zenith::text::detail
