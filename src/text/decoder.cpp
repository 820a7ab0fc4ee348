#include "text/decoder.h"

#include "text/json_config.h"
#include "text/utf8.h"
#include "zenith/error.h"

namespace zenith::text::detail {
namespace {

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  size_t last = 0;
  for (size_t at = s.find(from); !from.empty() && at != std::string_view::npos;
       at = s.find(from, last)) {
    out.append(s.substr(last, at - last));
    out.append(to);
    last = at + from.size();
  }
  out.append(s.substr(last));
  return out;
}

// The byte of a "<0xNN>" token, or -1.
int fallback_byte(std::string_view token) {
  if (token.size() != 6 || token.substr(0, 3) != "<0x" || token[5] != '>') return -1;
  int value = 0;
  for (char c : token.substr(3, 2)) {
    int digit = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                       : -1;
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

// Byte-level characters back to bytes; a token with a character outside the alphabet (an added
// token such as "\n\n") is kept as it is, as tokenizers does.
std::string byte_level_bytes(std::string_view token) {
  const auto& alphabet = byte_alphabet();
  std::string bytes;
  for (size_t i = 0; i < token.size();) {
    if (find_invalid_utf8(token.substr(i, char_len(token, i))) != std::string_view::npos)
      return std::string(token);
    uint32_t cp = decode_code_point(token, i);
    int b = cp < alphabet.byte_of_code_point.size() ? alphabet.byte_of_code_point[cp] : -1;
    if (b < 0) return std::string(token);
    bytes.push_back(char(b));
    i += char_len(token, i);
  }
  return bytes;
}

// Removes up to `count` copies of `content` from the front (back: from the end) of s.
int strip(std::string& s, const std::string& content, int count, bool back) {
  int removed = 0;
  while (removed < count && !content.empty() && s.size() >= content.size() &&
         s.compare(back ? s.size() - content.size() : 0, content.size(), content) == 0) {
    s.erase(back ? s.size() - content.size() : 0, content.size());
    ++removed;
  }
  return removed;
}

}  // namespace

TokenDecoder::TokenDecoder(const nlohmann::json& config, const std::string& where) {
  if (config.is_null()) {
    join_with_spaces_ = true;
    return;
  }
  bool fused = false;
  add(config, where, fused);
}

void TokenDecoder::add(const nlohmann::json& config, const std::string& where, bool& fused) {
  std::string type = type_of(config, where);
  if (type == "Sequence") {
    const auto& list = member(config, "decoders", "array", where);
    for (size_t i = 0; i < list.size(); ++i)
      add(list[i], where + ".decoders[" + std::to_string(i) + "]", fused);
    return;
  }
  if (type == "Fuse") {
    fused = true;
    return;
  }
  if (type == "Strip") {
    std::string content = member(config, "content", "string", where).get<std::string>();
    int start = member(config, "start", "integer", where).get<int>();
    int stop = member(config, "stop", "integer", where).get<int>();
    if (fused) {
      ZENITH_CHECK(stop == 0 && strip_start_ == 0, "[tokenizer] ", where,
                   ": Strip of trailing characters after Fuse is not supported");
      strip_content_ = content;
      strip_start_ = start;
    } else {
      Step step{Kind::kStrip};
      step.content = content;
      step.start = start;
      step.stop = stop;
      steps_.push_back(step);
    }
    return;
  }
  ZENITH_CHECK(!fused, "[tokenizer] ", where, ": a \"", type,
               "\" decoder after Fuse is not supported (only Strip)");
  if (type == "Replace") {
    auto [pattern, is_regex] = pattern_of(config, where);
    ZENITH_CHECK(!is_regex, "[tokenizer] ", where,
                 ".pattern: a Regex in a Replace decoder is not "
                 "supported (only String)");
    Step step{Kind::kReplace};
    step.from = pattern;
    step.to = member(config, "content", "string", where).get<std::string>();
    steps_.push_back(step);
  } else if (type == "ByteFallback") {
    steps_.push_back(Step{Kind::kByteFallback});
  } else if (type == "ByteLevel") {
    steps_.push_back(Step{Kind::kByteLevel});
    byte_level_ = true;
  } else if (type == "Metaspace") {
    std::string scheme =
        config.contains("prepend_scheme")
            ? member(config, "prepend_scheme", "string", where).get<std::string>()
            : (bool_or(config, "add_prefix_space", true, where) ? "always" : "never");
    Step step{Kind::kMetaspace};
    step.from = member(config, "replacement", "string", where).get<std::string>();
    step.strip_first = scheme != "never";
    steps_.push_back(step);
  } else {
    ZENITH_FAIL("[tokenizer] ", where, ".type: decoder \"", type,
                "\" is not supported (supported: Sequence, ByteLevel, ByteFallback, Metaspace, "
                "Replace, Strip, Fuse)");
  }
}

void TokenDecoder::append(std::string_view token, DecodeState& state, std::string& out) const {
  std::string s = join_with_spaces_ && state.position > 0 ? " " : "";
  s.append(token);
  bool bytes = false;  // s holds decoded bytes: later string steps leave it alone
  for (const Step& step : steps_) {
    if (bytes) break;
    switch (step.kind) {
      case Kind::kReplace:
        s = replace_all(s, step.from, step.to);
        break;
      case Kind::kByteFallback:
        if (int b = fallback_byte(s); b >= 0) {
          s.assign(1, char(b));
          bytes = true;
        }
        break;
      case Kind::kByteLevel:
        s = byte_level_bytes(s);
        bytes = true;
        break;
      case Kind::kMetaspace:
        s = replace_all(s, step.from, step.strip_first && state.position == 0 ? "" : " ");
        break;
      case Kind::kStrip:
        strip(s, step.content, step.start, false);
        strip(s, step.content, step.stop, true);
        break;
    }
  }
  if (state.strip_left < 0) state.strip_left = strip_start_;
  if (state.strip_left > 0) {
    state.strip_left -= strip(s, strip_content_, state.strip_left, false);
    if (!s.empty()) state.strip_left = 0;
  }
  if (!s.empty()) state.text_empty = false;
  ++state.position;
  out += s;
}

}  // namespace zenith::text::detail
