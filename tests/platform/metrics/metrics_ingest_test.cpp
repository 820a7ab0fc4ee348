// The metrics lines ranks append (as `zenith train` writes metrics.jsonl), parsed for ingestion.
#include "platform/metrics/metrics_ingest.h"

#include <gtest/gtest.h>

namespace zp = zenith::platform;

TEST(MetricLines, ParsesTrainOutputAndSkipsJunk) {
  auto points = zp::parse_metric_lines(
      "{\"step\": 10, \"epoch\": 1, \"name\": \"loss\", \"value\": 0.5, \"time\": 1.5}\n"
      "not json\n"
      "{\"name\": \"no value\"}\n"
      "{\"name\": \"comm_bytes\", \"value\": 4096, \"step\": 3}\n");
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0].name, "loss");
  EXPECT_EQ(points[0].step, 10);
  EXPECT_EQ(points[0].epoch, 1);
  EXPECT_DOUBLE_EQ(points[0].value, 0.5);
  EXPECT_DOUBLE_EQ(points[0].time, 1.5);
  EXPECT_EQ(points[1].name, "comm_bytes");
  EXPECT_EQ(points[1].step, 3);
}
