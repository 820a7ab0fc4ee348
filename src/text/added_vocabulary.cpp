#include "text/added_vocabulary.h"

#include <algorithm>

#include "text/utf8.h"

namespace zenith::text::detail {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// An ASCII letter, digit or underscore, or any non-ASCII character: single_word's "word" test.
bool is_word_byte(char c) {
  auto u = uint8_t(c);
  return u >= 0x80 || (u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') ||
         c == '_';
}

}  // namespace

AddedVocabulary::AddedVocabulary(std::vector<AddedTokenSpec> tokens)
    : tokens_(std::move(tokens)), by_first_byte_(256) {
  for (int i = 0; i < int(tokens_.size()); ++i)
    if (!tokens_[size_t(i)].content.empty())
      by_first_byte_[uint8_t(tokens_[size_t(i)].content[0])].push_back(i);
  for (auto& list : by_first_byte_)
    std::stable_sort(list.begin(), list.end(), [&](int a, int b) {
      return tokens_[size_t(a)].content.size() > tokens_[size_t(b)].content.size();
    });
}

int AddedVocabulary::match_at(std::string_view text, size_t at, bool skip_special) const {
  for (int index : by_first_byte_[uint8_t(text[at])]) {
    const AddedTokenSpec& t = tokens_[size_t(index)];
    if (skip_special && t.special) continue;
    if (text.compare(at, t.content.size(), t.content) != 0) continue;
    if (t.single_word) {
      size_t end = at + t.content.size();
      if (at > 0 && is_word_byte(text[at - 1]) && is_word_byte(t.content.front())) continue;
      if (end < text.size() && is_word_byte(text[end]) && is_word_byte(t.content.back())) continue;
    }
    return index;
  }
  return -1;
}

std::vector<Segment> AddedVocabulary::split(std::string_view text, bool skip_special) const {
  std::vector<Segment> segments;
  size_t text_start = 0;  // start of the pending text run
  for (size_t at = 0; at < text.size();) {
    int index = tokens_.empty() ? -1 : match_at(text, at, skip_special);
    if (index < 0) {
      at += char_len(text, at);
      continue;
    }
    const AddedTokenSpec& t = tokens_[size_t(index)];
    size_t begin = at, end = at + t.content.size();
    if (t.lstrip)
      while (begin > text_start && is_space(text[begin - 1])) --begin;
    if (t.rstrip)
      while (end < text.size() && is_space(text[end])) ++end;
    if (begin > text_start) segments.push_back({text_start, begin, -1});
    segments.push_back({begin, end, t.id});
    text_start = at = end;
  }
  if (text_start < text.size()) segments.push_back({text_start, text.size(), -1});
  return segments;
}

}  // namespace zenith::text::detail
