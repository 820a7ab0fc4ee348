// Normalizers beyond the fixtures' (Prepend/Replace/NFC): Unicode forms, regex Replace,
// Lowercase.
#include "text/normalizer.h"

#include <gtest/gtest.h>

#include "text/fixture.h"

namespace zenith::text::detail {
namespace {

std::string normalize(const nlohmann::json& config, const std::string& text) {
  return make_normalizer(config, "test")->apply(text);
}

TEST(Normalizer, UnicodeForms) {
  const std::string decomposed = "e\xCC\x81", composed = "\xC3\xA9";  // e + U+0301, é
  EXPECT_EQ(normalize({{"type", "NFC"}}, decomposed), composed);
  EXPECT_EQ(normalize({{"type", "NFD"}}, composed), decomposed);
  EXPECT_EQ(normalize({{"type", "NFKC"}}, "\xEF\xAC\x81"), "fi");  // the ligature U+FB01
  EXPECT_EQ(normalize({{"type", "NFKD"}}, "\xC2\xB2"), "2");       // superscript two
}

TEST(Normalizer, ReplacePrependLowercaseSequence) {
  nlohmann::json config = {
      {"type", "Sequence"},
      {"normalizers",
       {{{"type", "Replace"}, {"pattern", {{"Regex", R"(\s+)"}}}, {"content", " "}},
        {{"type", "Lowercase"}},
        {{"type", "Prepend"}, {"prepend", ">"}}}}};
  EXPECT_EQ(normalize(config, "Hello \t\n WORLD Straße ÄÖ"), ">hello world straße äö");
  EXPECT_EQ(normalize(config, ""), "");  // Prepend leaves empty text empty
}

TEST(Normalizer, UnsupportedType) {
  std::string e = testing::error_of([] {
    make_normalizer({{"type", "Precompiled"}}, "DIR/tokenizer.json: normalizer");
  });
  EXPECT_NE(e.find("DIR/tokenizer.json: normalizer.type: normalizer \"Precompiled\" is not "
                   "supported"),
            std::string::npos)
      << e;
}

}  // namespace
}  // namespace zenith::text::detail
