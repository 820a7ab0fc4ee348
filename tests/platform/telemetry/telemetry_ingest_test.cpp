// The metrics lines ranks append (as `zenith train` writes metrics.jsonl), parsed for ingestion.
#include "platform/telemetry/telemetry_ingest.h"

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

// zenith finetune's event lines (a loss spike, a rollback, a loss-scale overflow) keep their text
// for the alert; other lines have none.
TEST(MetricLines, KeepsTheEventOfAnEventLine) {
  auto points = zp::parse_metric_lines(
      "{\"step\": 10, \"epoch\": 0, \"name\": \"spike\", \"value\": 512.5, \"time\": 1, "
      "\"event\": \"loss spike: the loss 512.5 is above 3 x the running median 5.1; update "
      "skipped\"}\n"
      "{\"step\": 10, \"name\": \"loss\", \"value\": 5.0}\n"
      "{\"step\": 11, \"name\": \"rollback\", \"value\": 0.5, \"event\": 7}\n");
  ASSERT_EQ(points.size(), 3u);
  EXPECT_EQ(points[0].name, "spike");
  EXPECT_EQ(points[0].event,
            "loss spike: the loss 512.5 is above 3 x the running median 5.1; update skipped");
  EXPECT_EQ(points[1].event, "");
  EXPECT_EQ(points[2].event, "") << "an event that is not a string is none";
}

// A rank writes what it likes to its metrics file: long lines and names are skipped, and a job
// gets a bounded number of series and points per series.
TEST(MetricLines, LimitsLinesNamesSeriesAndPoints) {
  zp::TelemetryLimits limits;
  limits.max_line_bytes = 100;
  limits.max_name_bytes = 10;
  limits.max_series = 2;
  limits.max_points_per_series = 3;
  auto points = zp::parse_metric_lines("{\"name\": \"loss\", \"value\": 1, \"pad\": \"" +
                                           std::string(200, 'x') +
                                           "\"}\n"
                                           "{\"name\": \"a_very_long_metric_name\", \"value\": 1}\n"
                                           "{\"name\": \"loss\", \"value\": 2}\n",
                                       limits);
  ASSERT_EQ(points.size(), 1u);
  EXPECT_DOUBLE_EQ(points[0].value, 2);

  zp::SeriesCounts counts;
  std::vector<zp::MetricPoint> batch;
  for (const char* name : {"a", "a", "b", "c", "a", "a", "b"}) {
    zp::MetricPoint p;
    p.name = name;
    batch.push_back(p);
  }
  EXPECT_EQ(zp::admit_points(batch, 0, counts, limits), 2u);  // "c" (3rd series), 4th "a"
  ASSERT_EQ(batch.size(), 5u);
  EXPECT_EQ((counts[{"a", 0}]), 3);
  EXPECT_EQ((counts[{"b", 0}]), 2);
  EXPECT_EQ(counts.count({"c", 0}), 0u);
}
