// The dashboard's metrics tables: series per job, name and rank, downsampled, with file offsets.
#include "platform/telemetry/telemetry_store.h"

#include <gtest/gtest.h>

#include <ctime>
#include <string>
#include <utility>
#include <vector>

#include "support/temp_dir.h"

namespace zp = zenith::platform;

TEST(TelemetryStore, SeriesPerRankDownsampledWithOffsets) {
  zenith::testing::TempDir dir("telemetry_store");
  zp::TelemetryStore store(dir.str() + "/zenith.db");
  std::vector<zp::MetricPoint> points;
  for (int i = 0; i < 100000; ++i) points.push_back({"loss", i, i / 1000, 1.0 / (i + 1), 0.0});
  // CPU time, not wall time: on a shared host the wall clock measures the neighbours.
  const std::clock_t t0 = std::clock();
  store.add_points(7, 0, points, 1234);
  store.add_points(7, 1, {{"loss", 0, 0, 2.0, 0.0}}, 10);
  store.add_points(8, 0, {{"epoch_loss", 0, 0, 3.0, 0.0}}, 10);
  auto series = store.series(7, "loss", 0, 800);
  const double ms = 1e3 * double(std::clock() - t0) / CLOCKS_PER_SEC;
  EXPECT_EQ(series.total, 100000u);
  EXPECT_EQ(series.step.size(), 800u);
  EXPECT_EQ(series.step.front(), 0);
  EXPECT_EQ(series.step.back(), 99999);
  EXPECT_LT(ms, 3000) << "storing and downsampling 100k points (CPU ms)";
  std::printf("storing and downsampling 100k points: %.0f CPU ms\n", ms);
  EXPECT_EQ(store.file_offset(7, 0), 1234);
  EXPECT_EQ(store.file_offset(7, 1), 10);
  EXPECT_EQ(store.file_offset(9, 0), 0);
  auto names = store.series_names(7);
  ASSERT_EQ(names.size(), 2u);  // loss on ranks 0 and 1; job 8's series stay apart
  EXPECT_EQ(names[1], std::make_pair(std::string("loss"), 1));
  EXPECT_NEAR(*store.last_value(7, "loss"), 1e-5, 1e-9);  // rank 0's newest
  EXPECT_FALSE(store.last_value(7, "epoch_loss"));
  store.add_usage(7, {{0, 3, 100.0, 0.5, 1 << 20, -1, -1}, {1, 4, 100.0, 0.25, 2 << 20, -1, -1}});
  auto usage = store.usage(7, 100);
  ASSERT_EQ(usage.size(), 2u);
  EXPECT_EQ(usage[1].device, 4);
  EXPECT_DOUBLE_EQ(usage[1].cpu_utilization[0], 0.25);
}
