#define PCRE2_CODE_UNIT_WIDTH 8
#include "text/regex.h"

#include <pcre2.h>

#include "text/utf8.h"
#include "zenith/error.h"

namespace zenith::text::detail {

struct Regex::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

struct MatchData {
  pcre2_match_data* data;
  explicit MatchData(const pcre2_code* code)
      : data(pcre2_match_data_create_from_pattern(code, nullptr)) {}
  ~MatchData() { pcre2_match_data_free(data); }
};

}  // namespace

Regex::Regex(const std::string& pattern, const std::string& where)
    : code_(std::make_unique<Code>()), where_(where) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  code_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                              PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  ZENITH_CHECK(code_->code, "[tokenizer] ", where, ": invalid regex at offset ", offset, ": ",
               pcre2_message(error), " (pattern ", pattern, ")");
  pcre2_jit_compile(code_->code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter
}

Regex::~Regex() = default;

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> matches;
  MatchData match(code_->code);
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;
  while (start <= text.size()) {
    // The text was checked once by the tokenizer; no per-call UTF check (quadratic otherwise).
    int rc = pcre2_match(code_->code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, match.data,
                         nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    ZENITH_CHECK(rc >= 0, "[tokenizer] ", where_, ": regex match failed: ", pcre2_message(rc));
    PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match.data);
    size_t begin = ovector[0], end = ovector[1];
    if (end == begin) {  // an empty match: step over one character
      if (begin >= text.size()) break;
      start = begin + char_len(text, begin);
      continue;
    }
    matches.emplace_back(begin, end);
    start = end;
  }
  return matches;
}

}  // namespace zenith::text::detail
