// Reading a rank's log back: the last lines, always valid UTF-8.
#include "platform/exec/log_tail.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/files.h"
#include "support/temp_dir.h"

namespace zp = zenith::platform;

namespace {

const std::string kFffd = "\xEF\xBF\xBD";

}  // namespace

TEST(PlatformLogTail, ValidUtf8IsKept) {
  for (const std::string s : {"", "plain ascii\n", "caf\xC3\xA9", "\xE2\x82\xAC 5",
                              "\xF0\x9F\x98\x80 emoji", "\xEF\xBF\xBF", "\xF4\x8F\xBF\xBF"})
    EXPECT_EQ(zp::valid_utf8(s), s);
}

TEST(PlatformLogTail, EachBadByteBecomesOneReplacementCharacter) {
  EXPECT_EQ(zp::valid_utf8("caf\xA9"), "caf" + kFffd);               // a lone continuation
  EXPECT_EQ(zp::valid_utf8("\xE2\x82"), kFffd + kFffd);              // a cut sequence
  EXPECT_EQ(zp::valid_utf8("\xE2\x82x"), kFffd + kFffd + "x");       // cut in the middle
  EXPECT_EQ(zp::valid_utf8("\xC0\xAF"), kFffd + kFffd);              // overlong '/'
  EXPECT_EQ(zp::valid_utf8("\xE0\x80\xAF"), kFffd + kFffd + kFffd);  // overlong, 3 bytes
  EXPECT_EQ(zp::valid_utf8("\xED\xA0\x80"), kFffd + kFffd + kFffd);  // a UTF-16 surrogate
  EXPECT_EQ(zp::valid_utf8("\xF4\x90\x80\x80"), kFffd + kFffd + kFffd + kFffd);  // > U+10FFFF
  EXPECT_EQ(zp::valid_utf8("\xFF\xFE"), kFffd + kFffd);
}

TEST(PlatformLogTail, LastLinesAsValidUtf8) {
  zenith::testing::TempDir dir("log_tail");
  const std::string log = dir / "rank_0.log";
  zenith::testing::write_bytes(log, "one\ntwo \xA9\nthree\n");
  EXPECT_EQ(zp::tail_lines(log, 2), (std::vector<std::string>{"two " + kFffd, "three"}));
  EXPECT_EQ(zp::tail_lines(log, 10).size(), 3u);
  EXPECT_TRUE(zp::tail_lines(dir / "missing.log", 5).empty());
  EXPECT_FALSE(zp::looks_like_oom(zp::tail_lines(log, 2)));
  zenith::testing::write_bytes(log, "std::bad_alloc\n");
  EXPECT_TRUE(zp::looks_like_oom(zp::tail_lines(log, 2)));
}

TEST(PlatformLogTail, OomReasonNamesTheLimitPerRankAndWhatWasAllocated) {
  const std::vector<std::string> lines = {
      "2026-12-06T09:00:00.000Z step 1",
      "2026-12-06T09:00:01.000Z [storage] out of memory allocating 4194304 bytes (4 MiB) for a "
      "tensor: this process holds 900 MiB of tensors",
      "2026-12-06T09:00:01.000Z exiting"};
  EXPECT_EQ(zp::oom_reason(1536ll << 20, lines),
            ": out of memory (limit 1.5Gi per rank): [storage] out of memory allocating 4194304 "
            "bytes (4 MiB) for a tensor: this process holds 900 MiB of tensors");
  EXPECT_EQ(zp::oom_reason(0, {"Killed"}), ": out of memory");
}
