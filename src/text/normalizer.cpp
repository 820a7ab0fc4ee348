#include "text/normalizer.h"

#include <unicode/bytestream.h>
#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/unistr.h>

#include <vector>

#include "text/json_config.h"
#include "text/regex.h"
#include "zenith/error.h"

namespace zenith::text::detail {
namespace {

class Sequence : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  std::string apply(std::string text) const override {
    for (const auto& step : steps_) text = step->apply(std::move(text));
    return text;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

// Prepends to non-empty text only (as tokenizers' Prepend does).
class Prepend : public Normalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  std::string apply(std::string text) const override {
    return text.empty() ? text : prefix_ + text;
  }

 private:
  std::string prefix_;
};

class Replace : public Normalizer {
 public:
  Replace(const std::string& pattern, bool is_regex, std::string content, const std::string& where)
      : literal_(pattern), content_(std::move(content)) {
    if (is_regex) regex_ = std::make_unique<Regex>(pattern, where + ".pattern");
  }
  std::string apply(std::string text) const override {
    std::string out;
    size_t last = 0;
    auto replace = [&](size_t begin, size_t end) {
      out.append(text, last, begin - last);
      out += content_;
      last = end;
    };
    if (regex_) {
      for (auto [begin, end] : regex_->find_all(text)) replace(begin, end);
    } else if (!literal_.empty()) {
      for (size_t at = text.find(literal_); at != std::string::npos; at = text.find(literal_, last))
        replace(at, at + literal_.size());
    }
    out.append(text, last, std::string::npos);
    return out;
  }

 private:
  std::string literal_;
  std::unique_ptr<Regex> regex_;
  std::string content_;
};

// NFC, NFD, NFKC, NFKD through ICU.
class UnicodeForm : public Normalizer {
 public:
  UnicodeForm(const std::string& form, const std::string& where) {
    UErrorCode status = U_ZERO_ERROR;
    const char* name = form == "NFC" || form == "NFD" ? "nfc" : "nfkc";
    mode_ = form == "NFC" || form == "NFKC" ? UNORM2_COMPOSE : UNORM2_DECOMPOSE;
    normalizer_ = icu::Normalizer2::getInstance(nullptr, name, mode_, status);
    ZENITH_CHECK(U_SUCCESS(status), "[tokenizer] ", where, ": ICU has no ", form, ": ",
                 u_errorName(status));
  }
  std::string apply(std::string text) const override {
    std::string out;
    icu::StringByteSink<std::string> sink(&out);
    UErrorCode status = U_ZERO_ERROR;
    normalizer_->normalizeUTF8(0, icu::StringPiece(text), sink, nullptr, status);
    ZENITH_CHECK(U_SUCCESS(status),
                 "[tokenizer] Unicode normalization failed: ", u_errorName(status));
    return out;
  }

 private:
  UNormalization2Mode mode_;
  const icu::Normalizer2* normalizer_ = nullptr;
};

class Lowercase : public Normalizer {
 public:
  std::string apply(std::string text) const override {
    std::string out;
    icu::UnicodeString::fromUTF8(text).toLower(icu::Locale::getRoot()).toUTF8String(out);
    return out;
  }
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& config,
                                            const std::string& where) {
  if (config.is_null()) return nullptr;
  std::string type = type_of(config, where);
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> steps;
    const auto& list = member(config, "normalizers", "array", where);
    for (size_t i = 0; i < list.size(); ++i)
      if (auto step = make_normalizer(list[i], where + ".normalizers[" + std::to_string(i) + "]"))
        steps.push_back(std::move(step));
    return std::make_unique<Sequence>(std::move(steps));
  }
  if (type == "Prepend")
    return std::make_unique<Prepend>(member(config, "prepend", "string", where).get<std::string>());
  if (type == "Replace") {
    auto [pattern, is_regex] = pattern_of(config, where);
    return std::make_unique<Replace>(
        pattern, is_regex, member(config, "content", "string", where).get<std::string>(), where);
  }
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD")
    return std::make_unique<UnicodeForm>(type, where);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  ZENITH_FAIL("[tokenizer] ", where, ".type: normalizer \"", type,
              "\" is not supported (supported: Sequence, Prepend, Replace, NFC, NFD, NFKC, NFKD, "
              "Lowercase)");
}

}  // namespace zenith::text::detail
