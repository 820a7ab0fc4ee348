// Incremental detokenization and stop strings.
#include "serve/llm/text_stream.h"

#include <algorithm>

#include "zenith/text.h"

namespace zenith::serve::llm {
namespace {

bool ends_incomplete(const std::string& s) {  // U+FFFD: bytes that may still complete
  return s.size() >= 3 && s.compare(s.size() - 3, 3, "\xEF\xBF\xBD") == 0;
}

}  // namespace

TextStream::TextStream(const text::Tokenizer* tokenizer, const std::vector<int64_t>& context,
                       std::vector<std::string> stops)
    : tokenizer_(tokenizer), stops_(std::move(stops)) {
  stops_.erase(std::remove(stops_.begin(), stops_.end(), std::string()), stops_.end());
  const size_t keep = std::min<size_t>(context.size(), 5);
  for (size_t i = context.size() - keep; i < context.size(); ++i)
    ids_.push_back(int32_t(context[i]));
  read_ = ids_.size();
}

bool TextStream::add(int64_t token) {
  ids_.push_back(int32_t(token));
  if (tokenizer_ && limit_ == std::string::npos) {
    std::span<const int32_t> all(ids_);
    const std::string before = tokenizer_->decode(all.subspan(prefix_, read_ - prefix_), true);
    const std::string now = tokenizer_->decode(all.subspan(prefix_), true);
    if (now.size() > before.size() && !ends_incomplete(now)) {
      const size_t search_from = text_.size();
      text_ += now.substr(before.size());
      prefix_ = read_;
      read_ = ids_.size();
      // A stop string may begin in text held back before this token.
      const size_t from = search_from > emitted_ ? emitted_ : search_from;
      size_t best = std::string::npos;
      for (const std::string& s : stops_) {
        const size_t at = text_.find(s, from);
        if (at != std::string::npos && at < best) {
          best = at;
          stop_matched_ = s;
        }
      }
      if (best != std::string::npos) limit_ = best;
    }
  }
  token_end_.push_back(text_.size());
  return limit_ != std::string::npos;
}

std::string TextStream::take(bool final, int64_t* tokens_released) {
  size_t end = text_.size();
  if (limit_ != std::string::npos) {
    end = limit_;
  } else if (!final) {
    // Hold back the longest tail that begins some stop string.
    for (const std::string& s : stops_)
      for (size_t k = std::min(s.size() - 1, text_.size() - emitted_); k > 0; --k)
        if (text_.compare(text_.size() - k, k, s, 0, k) == 0) {
          end = std::min(end, text_.size() - k);
          break;
        }
  }
  std::string out;
  if (end > emitted_) {
    out = text_.substr(emitted_, end - emitted_);
    emitted_ = end;
  }
  size_t released = released_;
  const bool stopped = limit_ != std::string::npos;
  while (released < token_end_.size() &&
         (stopped ? token_end_[released] <= limit_ : token_end_[released] <= emitted_))
    ++released;
  if (final && !stopped) released = token_end_.size();
  *tokens_released = int64_t(released - released_);
  released_ = released;
  return out;
}

}  // namespace zenith::serve::llm
