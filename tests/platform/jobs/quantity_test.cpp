#include "platform/jobs/quantity.h"

#include <gtest/gtest.h>

namespace zp = zenith::platform;

TEST(PlatformQuantity, ParsesBinaryAndDecimalSizes) {
  EXPECT_EQ(zp::parse_size("64Gi").value(), 64LL << 30);
  EXPECT_EQ(zp::parse_size("100G").value(), 100000000000LL);
  EXPECT_EQ(zp::parse_size("512Mi").value(), 512LL << 20);
  EXPECT_EQ(zp::parse_size("1.5Ki").value(), 1536);
  EXPECT_EQ(zp::parse_size("4096").value(), 4096);
  EXPECT_EQ(zp::parse_size("10MiB").value(), 10LL << 20);
}

TEST(PlatformQuantity, RejectsMalformedSizes) {
  for (const char* bad : {"64Gx", "", "Gi", "-5Gi", "1..5G", "12 parsecs", "0x10"})
    EXPECT_FALSE(zp::parse_size(bad).has_value()) << bad;
}

TEST(PlatformQuantity, ParsesDurations) {
  EXPECT_DOUBLE_EQ(zp::parse_duration("90").value(), 90);
  EXPECT_DOUBLE_EQ(zp::parse_duration("90s").value(), 90);
  EXPECT_DOUBLE_EQ(zp::parse_duration("10m").value(), 600);
  EXPECT_DOUBLE_EQ(zp::parse_duration("1h30m").value(), 5400);
  EXPECT_DOUBLE_EQ(zp::parse_duration("2d").value(), 172800);
  EXPECT_DOUBLE_EQ(zp::parse_duration("500ms").value(), 0.5);
  EXPECT_FALSE(zp::parse_duration("1h30").has_value());
  EXPECT_FALSE(zp::parse_duration("soon").has_value());
}

TEST(PlatformQuantity, FormatsSizes) {
  EXPECT_EQ(zp::format_size(64LL << 30), "64Gi");
  EXPECT_EQ(zp::format_size(1536), "1.5Ki");
  EXPECT_EQ(zp::format_size(100), "100B");
}

TEST(PlatformQuantity, FormatsDurations) {
  EXPECT_EQ(zp::format_duration(0), "0s");
  EXPECT_EQ(zp::format_duration(12), "12s");
  EXPECT_EQ(zp::format_duration(0.25), "0.25s");  // a short restart delay, exactly
  EXPECT_EQ(zp::format_duration(1.5), "1.5s");
  EXPECT_EQ(zp::format_duration(2.001), "2s");
  EXPECT_EQ(zp::format_duration(245), "4m05s");
  EXPECT_EQ(zp::format_duration(3723), "1h02m03s");
}
