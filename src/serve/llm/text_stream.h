// A request's generated text as it streams: ids decoded incrementally (a window of ids before
// the new ones gives each its leading space; text whose UTF-8 is still incomplete waits), and
// stop strings held back while the text so far ends with the beginning of one, so no text is
// ever emitted that later turns out to be part of a stop string.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zenith::text {
class Tokenizer;
}

namespace zenith::serve::llm {

class TextStream {
 public:
  // `context`: the last prompt ids (decoded as context, never emitted). tokenizer may be null:
  // no text, every token released at once.
  TextStream(const text::Tokenizer* tokenizer, const std::vector<int64_t>& context,
             std::vector<std::string> stops);

  // Adds a generated id. Returns true when a stop string now appears: the text up to it is all
  // that will be emitted (take() returns it), the rest dropped.
  bool add(int64_t token);
  // The text that can be emitted now, and the number of tokens whose text it completes (tokens
  // are released in order). With `final`, everything held back is released (the stream ended
  // for another reason, so no stop string can complete any more).
  std::string take(bool final, int64_t* tokens_released);
  const std::string& stop_matched() const { return stop_matched_; }

 private:
  const text::Tokenizer* tokenizer_;
  std::vector<std::string> stops_;
  std::vector<int32_t> ids_;          // context + generated
  size_t prefix_ = 0, read_ = 0;      // decode window: ids_[prefix_, read_) decoded already
  std::string text_;                  // generated text decoded so far
  size_t emitted_ = 0;                // bytes of text_ emitted
  size_t limit_ = std::string::npos;  // a stop string starts here
  std::vector<size_t> token_end_;     // text_ size after each generated token
  size_t released_ = 0;               // tokens released
  std::string stop_matched_;
};

}  // namespace zenith::serve::llm
