// Pre-tokenizer split behaviours (tokenizers' documented "the-final--countdown" examples), and
// the splitters the fixtures do not reach.
#include "text/pre_tokenizer.h"

#include <gtest/gtest.h>

#include "text/fixture.h"

namespace zenith::text::detail {
namespace {

std::vector<std::string> split(const nlohmann::json& config, const std::string& text,
                               bool at_start = true) {
  auto pre = make_pre_tokenizer(config, "test");
  std::vector<Piece> pieces = {{text, at_start}};
  pre->apply(pieces);
  std::vector<std::string> out;
  for (const Piece& p : pieces) out.push_back(p.text);
  return out;
}

nlohmann::json split_on_dash(const std::string& behavior, bool invert = false) {
  return {{"type", "Split"},
          {"pattern", {{"String", "-"}}},
          {"behavior", behavior},
          {"invert", invert}};
}

using Strings = std::vector<std::string>;

TEST(PreTokenizer, SplitBehaviours) {
  const std::string text = "the-final--countdown";
  EXPECT_EQ(split(split_on_dash("Removed"), text), (Strings{"the", "final", "countdown"}));
  EXPECT_EQ(split(split_on_dash("Isolated"), text),
            (Strings{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(split(split_on_dash("MergedWithPrevious"), text),
            (Strings{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(split(split_on_dash("MergedWithNext"), text),
            (Strings{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(split(split_on_dash("Contiguous"), text),
            (Strings{"the", "-", "final", "--", "countdown"}));
  EXPECT_EQ(split(split_on_dash("Removed", /*invert=*/true), text), (Strings{"-", "-", "-"}));
}

TEST(PreTokenizer, RegexSplitWithUnicodeClasses) {
  nlohmann::json config = {{"type", "Split"},
                           {"pattern", {{"Regex", R"(\p{N}{1,3}| ?\p{L}+|\s+)"}}},
                           {"behavior", "Isolated"}};
  EXPECT_EQ(split(config, "Grüße 12345 日本"), (Strings{"Grüße", " ", "123", "45", " 日本"}));
}

TEST(PreTokenizer, OtherSplitters) {
  EXPECT_EQ(split({{"type", "Digits"}, {"individual_digits", true}}, "a123b"),
            (Strings{"a", "1", "2", "3", "b"}));
  EXPECT_EQ(split({{"type", "Digits"}, {"individual_digits", false}}, "a123b4"),
            (Strings{"a", "123", "b", "4"}));
  EXPECT_EQ(split({{"type", "Whitespace"}}, "Hey friend!  How are you?!?"),
            (Strings{"Hey", "friend", "!", "How", "are", "you", "?!?"}));
  EXPECT_EQ(split({{"type", "WhitespaceSplit"}}, "Hey friend!  How?"),
            (Strings{"Hey", "friend!", "How?"}));
}

TEST(PreTokenizer, ByteLevelAndMetaspace) {
  nlohmann::json byte_level = {
      {"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}};
  EXPECT_EQ(split(byte_level, "Hello  world\n"), (Strings{"ĠHello", "Ġ", "Ġworld", "Ċ"}));
  nlohmann::json metaspace = {
      {"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}, {"split", true}};
  EXPECT_EQ(split(metaspace, "Hey  friend"), (Strings{"▁Hey", "▁", "▁friend"}));
  EXPECT_EQ(split(metaspace, "Hey friend", /*at_start=*/false), (Strings{"Hey", "▁friend"}));
  // Older files: add_prefix_space instead of prepend_scheme.
  nlohmann::json old = {
      {"type", "Metaspace"}, {"replacement", "▁"}, {"add_prefix_space", true}, {"split", false}};
  EXPECT_EQ(split(old, "Hey friend", false), (Strings{"▁Hey▁friend"}));
}

TEST(PreTokenizer, Errors) {
  EXPECT_EQ(testing::error_of([] {
              make_pre_tokenizer(split_on_dash("Sideways"), "DIR/tokenizer.json: pre_tokenizer");
            }),
            "[tokenizer] DIR/tokenizer.json: pre_tokenizer.behavior: \"Sideways\" is not one of "
            "Isolated, Removed, MergedWithPrevious, MergedWithNext, Contiguous");
}

}  // namespace
}  // namespace zenith::text::detail
