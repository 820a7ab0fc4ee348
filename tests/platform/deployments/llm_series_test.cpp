// The dashboard's LLM series from a service's /metrics text (vLLM's names under `zenith:`).
#include "platform/deployments/llm_series.h"

#include <gtest/gtest.h>

#include <string>

namespace zp = zenith::platform;

namespace {

// A /metrics text as an LLM service writes it (serve/llm/openai_metrics.cpp), trimmed.
std::string metrics(double running, double waiting, double kv, double ttft_sum, int ttft_count,
                    double itl_sum, int itl_count, int tokens) {
  const std::string m = "{model_name=\"fortunes\"} ";
  auto n = [](double v) { return std::to_string(v); };
  return "# HELP zenith:num_requests_running Requests in the engine's running batch.\n"
         "zenith:num_requests_running" +
         m + n(running) + "\n" + "zenith:num_requests_waiting" + m + n(waiting) + "\n" +
         "zenith:kv_cache_usage_perc" + m + n(kv) + "\n" + "zenith:generation_tokens_total" + m +
         n(tokens) + "\n" +
         "zenith:time_to_first_token_seconds_bucket{model_name=\"fortunes\",le=\"0.01\"} 1\n" +
         "zenith:time_to_first_token_seconds_sum" + m + n(ttft_sum) + "\n" +
         "zenith:time_to_first_token_seconds_count" + m + n(ttft_count) + "\n" +
         "zenith:inter_token_latency_seconds_sum" + m + n(itl_sum) + "\n" +
         "zenith:inter_token_latency_seconds_count" + m + n(itl_count) + "\n" +
         "zenith_serve_requests_total{model=\"fortunes\",endpoint=\"chat_completions\",status="
         "\"200\"} 3\n";
}

}  // namespace

TEST(LlmSeries, IntervalMeansAndRatesFromCountersAndHistograms) {
  zp::LlmSeries s;
  EXPECT_TRUE(s.add(100, metrics(0, 0, 0, 0, 0, 0, 0, 0)));
  // In one second: 2 first tokens (30 ms and 50 ms), 40 more tokens 5 ms apart, 42 in all.
  EXPECT_TRUE(s.add(101, metrics(2, 1, 0.25, 0.08, 2, 0.2, 40, 42)));
  // Then half a second with no requests.
  EXPECT_TRUE(s.add(101.5, metrics(0, 0, 0, 0.08, 2, 0.2, 40, 42)));
  const auto j = s.to_json();
  ASSERT_EQ(j["time"].size(), 3u);
  EXPECT_TRUE(j["ttft_ms"][0].is_null());  // no interval before the first sample
  EXPECT_NEAR(j["ttft_ms"][1].get<double>(), 40, 1e-9);
  EXPECT_NEAR(j["itl_ms"][1].get<double>(), 5, 1e-9);
  EXPECT_NEAR(j["tokens_per_s"][1].get<double>(), 42, 1e-9);
  EXPECT_EQ(j["running"][1], 2);
  EXPECT_EQ(j["waiting"][1], 1);
  EXPECT_NEAR(j["kv_cache_usage"][1].get<double>(), 0.25, 1e-9);
  EXPECT_TRUE(j["ttft_ms"][2].is_null());  // no first token in that interval
  EXPECT_TRUE(j["itl_ms"][2].is_null());
  EXPECT_EQ(j["tokens_per_s"][2], 0);
}

TEST(LlmSeries, ACnnServiceAddsNothingAndARestartStartsANewBaseline) {
  zp::LlmSeries s;
  EXPECT_FALSE(s.add(1, "zenith_serve_requests_total{model=\"m\",endpoint=\"infer\"} 3\n"));
  EXPECT_TRUE(s.empty());
  s.add(1, metrics(0, 0, 0, 1, 10, 1, 100, 500));
  s.add(2, metrics(1, 0, 0.1, 0.02, 1, 0.01, 2, 3));  // counters went down: restarted
  s.add(3, metrics(1, 0, 0.1, 0.05, 2, 0.03, 4, 8));
  const auto j = s.to_json();
  EXPECT_TRUE(j["tokens_per_s"][1].is_null());
  EXPECT_NEAR(j["tokens_per_s"][2].get<double>(), 5, 1e-9);
  EXPECT_NEAR(j["ttft_ms"][2].get<double>(), 30, 1e-9);
}

TEST(LlmSeries, KeepsTheLastTenMinutes) {
  zp::LlmSeries s;
  for (int i = 0; i < 700; ++i) s.add(i, metrics(0, 0, 0, 0, 0, 0, 0, i));
  const auto j = s.to_json();
  ASSERT_EQ(j["time"].size(), zp::LlmSeries::kMaxSamples);
  EXPECT_EQ(j["time"][0], 100);
  EXPECT_EQ(j["tokens_per_s"].back(), 1);
}
