// Lossy UTF-8: the two replacement policies and holding back incomplete characters.
#include "text/utf8.h"

#include <gtest/gtest.h>

namespace zenith::text::detail {
namespace {

const std::string kFFFD = "\xEF\xBF\xBD";

std::string lossy(const std::string& bytes, bool per_byte) {
  std::string out;
  EXPECT_EQ(append_lossy(bytes, per_byte, /*final=*/true, out), bytes.size());
  return out;
}

TEST(Utf8, MaximalSubpartOrPerByte) {
  // E2 82 is the start of a 3-byte character cut short by 'A'.
  EXPECT_EQ(lossy("x\xE2\x82"
                  "A",
                  false),
            "x" + kFFFD + "A");
  EXPECT_EQ(lossy("x\xE2\x82"
                  "A",
                  true),
            "x" + kFFFD + kFFFD + "A");
  EXPECT_EQ(lossy("\x80\xBF", false), kFFFD + kFFFD);              // lone continuation bytes
  EXPECT_EQ(lossy("\xC0\xAF", false), kFFFD + kFFFD);              // overlong: never valid
  EXPECT_EQ(lossy("\xED\xA0\x80", false), kFFFD + kFFFD + kFFFD);  // a surrogate
  EXPECT_EQ(lossy("\xF0\x9F\x98\x80", false), "\xF0\x9F\x98\x80");
  EXPECT_EQ(lossy("\xF0\x9F\x98", false), kFFFD);  // cut at the end
  EXPECT_EQ(lossy("\xF0\x9F\x98", true), kFFFD + kFFFD + kFFFD);
}

TEST(Utf8, HoldsBackIncompleteCharacters) {
  std::string out;
  EXPECT_EQ(append_lossy("ab\xF0\x9F", false, /*final=*/false, out), 2u);
  EXPECT_EQ(out, "ab");
  // An invalid byte is decided at once.
  out.clear();
  EXPECT_EQ(append_lossy("a\xFF", false, false, out), 2u);
  EXPECT_EQ(out, "a" + kFFFD);
}

TEST(Utf8, Validation) {
  EXPECT_EQ(find_invalid_utf8("héllo 日本 😀"), std::string_view::npos);
  EXPECT_EQ(find_invalid_utf8("ab\xC3"), 2u);
  EXPECT_EQ(find_invalid_utf8("ab\xC3(c"), 2u);
}

TEST(Utf8, ByteAlphabet) {
  const ByteAlphabet& a = byte_alphabet();
  EXPECT_EQ(a.char_of_byte[' '], "Ġ");
  EXPECT_EQ(a.char_of_byte['\n'], "Ċ");
  EXPECT_EQ(a.char_of_byte['A'], "A");
  for (int b = 0; b < 256; ++b) {
    uint32_t cp = decode_code_point(a.char_of_byte[size_t(b)], 0);
    ASSERT_EQ(a.byte_of_code_point[cp], b);
  }
}

}  // namespace
}  // namespace zenith::text::detail
