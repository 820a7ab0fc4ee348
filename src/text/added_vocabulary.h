// Added tokens matched in the text before the model runs: the leftmost, then longest, match
// wins (tokenizers' AddedVocabulary), with lstrip/rstrip taking neighbouring whitespace and
// single_word requiring word boundaries.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zenith::text::detail {

struct AddedTokenSpec {
  int32_t id = -1;
  std::string content;
  bool special = true;
  bool single_word = false, lstrip = false, rstrip = false;
  bool normalized = false;
};

// A run of text or a matched token.
struct Segment {
  size_t begin, end;  // byte range in the text split
  int32_t id = -1;    // the token's id, -1 for text
};

class AddedVocabulary {
 public:
  AddedVocabulary() = default;
  explicit AddedVocabulary(std::vector<AddedTokenSpec> tokens);

  // The text as runs of text and matched tokens; with skip_special, special tokens are not
  // matched (they stay text). Token segments include the whitespace lstrip/rstrip took.
  std::vector<Segment> split(std::string_view text, bool skip_special) const;
  bool empty() const { return tokens_.empty(); }

 private:
  // The longest token matching at text[at], or -1.
  int match_at(std::string_view text, size_t at, bool skip_special) const;

  std::vector<AddedTokenSpec> tokens_;
  std::vector<std::vector<int>> by_first_byte_;  // token indices, longest first
};

}  // namespace zenith::text::detail
