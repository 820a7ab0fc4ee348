// Restarts back off exponentially up to a cap; a healthy run resets the crash count.
#include "platform/jobs/backoff.h"

#include <gtest/gtest.h>

namespace zp = zenith::platform;

TEST(PlatformBackoff, DoublesUpToTheCap) {
  EXPECT_DOUBLE_EQ(zp::backoff_delay(1, 1, 60), 1);
  EXPECT_DOUBLE_EQ(zp::backoff_delay(2, 1, 60), 2);
  EXPECT_DOUBLE_EQ(zp::backoff_delay(3, 1, 60), 4);
  EXPECT_DOUBLE_EQ(zp::backoff_delay(6, 1, 60), 32);
  EXPECT_DOUBLE_EQ(zp::backoff_delay(7, 1, 60), 60);
  EXPECT_DOUBLE_EQ(zp::backoff_delay(1000, 1, 60), 60);  // no overflow
  EXPECT_DOUBLE_EQ(zp::backoff_delay(0, 0.5, 60), 0.5);
}

TEST(PlatformBackoff, HealthyRunResetsTheCrashCount) {
  zp::CrashCounter c;
  EXPECT_EQ(c.on_exit(1, 60), 1);
  EXPECT_EQ(c.on_exit(2, 60), 2);
  EXPECT_EQ(c.on_exit(0.5, 60), 3);
  EXPECT_EQ(c.on_exit(61, 60), 1);  // ran a minute: this exit starts a new count
  EXPECT_EQ(c.on_exit(3, 60), 2);
}
