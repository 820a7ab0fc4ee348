// The NVML sampler against a stand-in libnvidia-ml (fake_nvml.cpp beside this file).
#include "platform/telemetry/nvml.h"

#include <gtest/gtest.h>

namespace zp = zenith::platform;

TEST(Nvml, SamplesEveryGpuThroughTheLibraryAndClosesIt) {
  EXPECT_EQ(zp::Nvml::open("/nonexistent/libnvidia-ml.so.1"), nullptr);  // no driver: no GPUs
  auto nvml = zp::Nvml::open(ZENITH_FAKE_NVML);
  ASSERT_NE(nvml, nullptr);
  ASSERT_EQ(nvml->device_count(), 2);
  auto busy = nvml->sample(1);
  ASSERT_TRUE(busy);
  EXPECT_DOUBLE_EQ(busy->utilization, 0.42);
  EXPECT_EQ(busy->memory_used, 3ll << 30);
  EXPECT_EQ(busy->memory_total, 80ll << 30);
  EXPECT_DOUBLE_EQ(nvml->sample(0)->utilization, 0);
  EXPECT_FALSE(nvml->sample(2));
  EXPECT_FALSE(nvml->sample(-1));
}
