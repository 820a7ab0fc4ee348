// PCRE2 in UTF + Unicode-property mode, for the pre-tokenizer patterns of tokenizer.json
// (\p{L}, \p{N}, (?i:...), look-ahead), JIT-compiled.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zenith::text::detail {

class Regex {
 public:
  // `where` names the pattern's origin in errors ("tokenizer.json: pre_tokenizer.pattern").
  Regex(const std::string& pattern, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // [begin, end) of every non-overlapping match, left to right (text: valid UTF-8).
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;

 private:
  struct Code;
  std::unique_ptr<Code> code_;
  std::string where_;
};

}  // namespace zenith::text::detail
