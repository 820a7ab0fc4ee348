// Largest-triangle-three-buckets downsampling of the dashboard's series.
#include "platform/telemetry/downsample.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace zp = zenith::platform;

TEST(Downsample, KeepsEndsAndSpikesWithinBudget) {
  std::vector<double> x, y;
  for (int i = 0; i < 100000; ++i) {
    x.push_back(i);
    y.push_back(std::sin(i / 1000.0));
  }
  y[54321] = 50;  // a spike must survive
  auto idx = zp::lttb_indices(x, y, 500);
  ASSERT_EQ(idx.size(), 500u);
  EXPECT_EQ(idx.front(), 0u);
  EXPECT_EQ(idx.back(), 99999u);
  EXPECT_TRUE(std::is_sorted(idx.begin(), idx.end()));
  EXPECT_NE(std::find(idx.begin(), idx.end(), 54321u), idx.end());
  // Short series come back whole.
  EXPECT_EQ(zp::lttb_indices({1, 2, 3}, {4, 5, 6}, 500).size(), 3u);
}
