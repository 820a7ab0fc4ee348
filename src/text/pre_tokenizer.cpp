#include "text/pre_tokenizer.h"

#include <algorithm>

#include "text/json_config.h"
#include "text/regex.h"
#include "text/utf8.h"
#include "zenith/error.h"

namespace zenith::text::detail {

const char* const kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

enum class Behavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };

Behavior behavior_of(const std::string& name, const std::string& where) {
  if (name == "Isolated") return Behavior::kIsolated;
  if (name == "Removed") return Behavior::kRemoved;
  if (name == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return Behavior::kMergedWithNext;
  if (name == "Contiguous") return Behavior::kContiguous;
  ZENITH_FAIL("[tokenizer] ", where, ".behavior: \"", name,
              "\" is not one of Isolated, Removed, MergedWithPrevious, MergedWithNext, "
              "Contiguous");
}

struct Span {
  size_t begin, end;
  bool match;
};

// Splits `piece` at `matches` ([begin, end) ranges) as tokenizers' split behaviours do.
void split_piece(const Piece& piece, const std::vector<std::pair<size_t, size_t>>& matches,
                 Behavior behavior, bool invert, std::vector<Piece>& out) {
  const std::string& text = piece.text;
  std::vector<Span> spans;
  spans.reserve(2 * matches.size() + 1);
  size_t last = 0;
  for (auto [begin, end] : matches) {
    if (begin > last) spans.push_back({last, begin, invert});
    spans.push_back({begin, end, !invert});
    last = end;
  }
  if (last < text.size()) spans.push_back({last, text.size(), invert});

  std::vector<Span> parts;  // `match` unused from here on
  parts.reserve(spans.size());
  bool previous_match = false;
  switch (behavior) {
    case Behavior::kIsolated:
      parts.assign(spans.begin(), spans.end());
      break;
    case Behavior::kRemoved:
      for (const Span& s : spans)
        if (!s.match) parts.push_back(s);
      break;
    case Behavior::kContiguous:
      for (const Span& s : spans) {
        if (s.match && previous_match)
          parts.back().end = s.end;
        else
          parts.push_back(s);
        previous_match = s.match;
      }
      break;
    case Behavior::kMergedWithPrevious:
      for (const Span& s : spans) {
        if (s.match && !previous_match && !parts.empty())
          parts.back().end = s.end;
        else
          parts.push_back(s);
        previous_match = s.match;
      }
      break;
    case Behavior::kMergedWithNext:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->match && !previous_match && !parts.empty())
          parts.back().begin = it->begin;
        else
          parts.push_back(*it);
        previous_match = it->match;
      }
      std::reverse(parts.begin(), parts.end());
      break;
  }
  for (const Span& s : parts)
    if (s.end > s.begin)
      out.push_back({text.substr(s.begin, s.end - s.begin), piece.at_start && s.begin == 0});
}

// Finds matches of a regex or of a literal string.
class Matcher {
 public:
  Matcher(const std::string& pattern, bool is_regex, const std::string& where) : literal_(pattern) {
    if (is_regex) regex_ = std::make_unique<Regex>(pattern, where);
  }
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const {
    if (regex_) return regex_->find_all(text);
    std::vector<std::pair<size_t, size_t>> matches;
    if (literal_.empty()) return matches;
    for (size_t at = text.find(literal_); at != std::string_view::npos;
         at = text.find(literal_, at + literal_.size()))
      matches.emplace_back(at, at + literal_.size());
    return matches;
  }

 private:
  std::string literal_;
  std::unique_ptr<Regex> regex_;
};

// Applies `fn(piece, out)` to every piece.
template <typename Fn>
void for_each_piece(std::vector<Piece>& pieces, Fn&& fn) {
  std::vector<Piece> out;
  out.reserve(pieces.size());
  for (const Piece& piece : pieces) fn(piece, out);
  pieces = std::move(out);
}

class Sequence : public PreTokenizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}
  void apply(std::vector<Piece>& pieces) const override {
    for (const auto& step : steps_) step->apply(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

// Split, and the splitters built on a fixed regex: Digits, Whitespace, WhitespaceSplit.
class Split : public PreTokenizer {
 public:
  // `where` names the pattern in errors.
  Split(const std::string& pattern, bool is_regex, Behavior behavior, bool invert,
        const std::string& where)
      : matcher_(pattern, is_regex, where), behavior_(behavior), invert_(invert) {}
  void apply(std::vector<Piece>& pieces) const override {
    for_each_piece(pieces, [&](const Piece& piece, std::vector<Piece>& out) {
      split_piece(piece, matcher_.find_all(piece.text), behavior_, invert_, out);
    });
  }

 private:
  Matcher matcher_;
  Behavior behavior_;
  bool invert_;
};

// Optionally a prefix space and GPT-2's regex split, then every byte as its alphabet character.
class ByteLevel : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex, const std::string& where)
      : add_prefix_space_(add_prefix_space) {
    if (use_regex) regex_ = std::make_unique<Regex>(kGpt2Pattern, where + " (GPT-2 regex)");
  }
  void apply(std::vector<Piece>& pieces) const override {
    const auto& alphabet = byte_alphabet();
    for_each_piece(pieces, [&](const Piece& in, std::vector<Piece>& out) {
      Piece piece{add_prefix_space_ && (in.text.empty() || in.text[0] != ' ') ? " " : "",
                  in.at_start};
      piece.text.append(in.text);
      size_t first = out.size();
      if (regex_)
        split_piece(piece, regex_->find_all(piece.text), Behavior::kIsolated, false, out);
      else
        out.push_back(std::move(piece));
      for (size_t i = first; i < out.size(); ++i) {
        std::string mapped;
        mapped.reserve(out[i].text.size() * 2);
        for (char c : out[i].text) mapped += alphabet.char_of_byte[uint8_t(c)];
        out[i].text = std::move(mapped);
      }
    });
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> regex_;
};

enum class Prepend { kAlways, kFirst, kNever };

// Spaces become the replacement ("▁"), prepended to words as prepend_scheme says.
class Metaspace : public PreTokenizer {
 public:
  Metaspace(std::string replacement, Prepend prepend, bool split)
      : replacement_(std::move(replacement)), prepend_(prepend), split_(split) {}
  void apply(std::vector<Piece>& pieces) const override {
    for_each_piece(pieces, [&](const Piece& in, std::vector<Piece>& out) {
      Piece piece{"", in.at_start};
      for (char c : in.text) {
        if (c == ' ')
          piece.text += replacement_;
        else
          piece.text.push_back(c);
      }
      bool prepend = prepend_ == Prepend::kAlways || (prepend_ == Prepend::kFirst && in.at_start);
      if (prepend && piece.text.compare(0, replacement_.size(), replacement_) != 0)
        piece.text.insert(0, replacement_);
      if (!split_) {
        out.push_back(std::move(piece));
        return;
      }
      std::vector<std::pair<size_t, size_t>> matches;
      for (size_t at = piece.text.find(replacement_); at != std::string::npos;
           at = piece.text.find(replacement_, at + replacement_.size()))
        matches.emplace_back(at, at + replacement_.size());
      split_piece(piece, matches, Behavior::kMergedWithNext, false, out);
    });
  }

 private:
  std::string replacement_;
  Prepend prepend_;
  bool split_;
};

Prepend prepend_scheme(const nlohmann::json& config, const std::string& where) {
  // Older files say add_prefix_space (true: always) instead of prepend_scheme.
  if (!config.contains("prepend_scheme"))
    return bool_or(config, "add_prefix_space", true, where) ? Prepend::kAlways : Prepend::kNever;
  std::string scheme = member(config, "prepend_scheme", "string", where).get<std::string>();
  if (scheme == "always") return Prepend::kAlways;
  if (scheme == "first") return Prepend::kFirst;
  if (scheme == "never") return Prepend::kNever;
  ZENITH_FAIL("[tokenizer] ", where, ".prepend_scheme: \"", scheme,
              "\" is not one of always, first, never");
}

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& config,
                                                 const std::string& where) {
  if (config.is_null()) return nullptr;
  std::string type = type_of(config, where);
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    const auto& list = member(config, "pretokenizers", "array", where);
    for (size_t i = 0; i < list.size(); ++i)
      if (auto step =
              make_pre_tokenizer(list[i], where + ".pretokenizers[" + std::to_string(i) + "]"))
        steps.push_back(std::move(step));
    return std::make_unique<Sequence>(std::move(steps));
  }
  if (type == "Split") {
    auto [pattern, is_regex] = pattern_of(config, where);
    return std::make_unique<Split>(
        pattern, is_regex,
        behavior_of(member(config, "behavior", "string", where).get<std::string>(), where),
        bool_or(config, "invert", false, where), where + ".pattern");
  }
  if (type == "ByteLevel")
    return std::make_unique<ByteLevel>(bool_or(config, "add_prefix_space", true, where),
                                       bool_or(config, "use_regex", true, where), where);
  if (type == "Metaspace") {
    std::string replacement = member(config, "replacement", "string", where).get<std::string>();
    ZENITH_CHECK(!replacement.empty(), "[tokenizer] ", where, ".replacement is empty");
    return std::make_unique<Metaspace>(replacement, prepend_scheme(config, where),
                                       bool_or(config, "split", true, where));
  }
  if (type == "Digits") {
    bool individual = bool_or(config, "individual_digits", false, where);
    return std::make_unique<Split>(individual ? R"(\p{N})" : R"(\p{N}+)", true,
                                   individual ? Behavior::kIsolated : Behavior::kContiguous, false,
                                   where);
  }
  if (type == "Whitespace")  // keeps the matches: words and punctuation runs
    return std::make_unique<Split>(R"(\w+|[^\w\s]+)", true, Behavior::kRemoved, true, where);
  if (type == "WhitespaceSplit")
    return std::make_unique<Split>(R"(\s+)", true, Behavior::kRemoved, false, where);
  ZENITH_FAIL("[tokenizer] ", where, ".type: pre-tokenizer \"", type,
              "\" is not supported (supported: Sequence, Split, ByteLevel, Metaspace, Digits, "
              "Whitespace, WhitespaceSplit)");
}

}  // namespace zenith::text::detail
