// tokenizer.json decoders the fixtures do not reach: none at all, per-token Strip, Metaspace with
// prepend_scheme never, and what Fuse allows after it.
#include "text/decoder.h"

#include <gtest/gtest.h>

#include "text/fixture.h"

namespace zenith::text::detail {
namespace {

std::string decode(const nlohmann::json& config, const std::vector<std::string>& tokens) {
  TokenDecoder decoder(config, "test");
  DecodeState state;
  std::string out;
  for (const std::string& t : tokens) decoder.append(t, state, out);
  return out;
}

TEST(Decoder, NoDecoderJoinsWithSpaces) { EXPECT_EQ(decode(nullptr, {"a", "b", "c"}), "a b c"); }

TEST(Decoder, StripPerTokenAndAfterFuse) {
  nlohmann::json per_token = {{"type", "Strip"}, {"content", "_"}, {"start", 1}, {"stop", 1}};
  EXPECT_EQ(decode(per_token, {"_a_", "__b__"}), "a_b_");
  nlohmann::json fused = {
      {"type", "Sequence"},
      {"decoders",
       {{{"type", "Fuse"}}, {{"type", "Strip"}, {"content", " "}, {"start", 2}, {"stop", 0}}}}};
  // The whole text loses up to two leading spaces, however the tokens carry them.
  EXPECT_EQ(decode(fused, {" ", "", "  a", " b"}), " a b");
}

TEST(Decoder, Metaspace) {
  nlohmann::json always = {
      {"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "always"}};
  EXPECT_EQ(decode(always, {"▁Hey", "▁friend"}), "Hey friend");
  nlohmann::json never = {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "never"}};
  EXPECT_EQ(decode(never, {"▁Hey", "▁friend"}), " Hey friend");
}

TEST(Decoder, OnlyStripAfterFuse) {
  nlohmann::json config = {{"type", "Sequence"},
                           {"decoders", {{{"type", "Fuse"}}, {{"type", "ByteFallback"}}}}};
  EXPECT_EQ(testing::error_of([&] { TokenDecoder(config, "DIR/tokenizer.json: decoder"); }),
            "[tokenizer] DIR/tokenizer.json: decoder.decoders[1]: a \"ByteFallback\" decoder "
            "after Fuse is not supported (only Strip)");
}

}  // namespace
}  // namespace zenith::text::detail
