// The devices a server offers: logical CPU devices (cores split between them) or GPUs.
#include "platform/jobs/device_inventory.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace zp = zenith::platform;

TEST(PlatformDeviceInventory, SplitsCores) {
  auto two = zp::split_cores({0, 1}, 8);
  ASSERT_EQ(two.size(), 8u);
  for (int d = 0; d < 8; ++d) EXPECT_EQ(two[d], std::vector<int>{d % 2});
  auto sixteen = zp::split_cores({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, 8);
  EXPECT_EQ(sixteen[3], (std::vector<int>{6, 7}));
  auto odd = zp::split_cores({0, 1, 2}, 2);
  EXPECT_EQ(odd[0], (std::vector<int>{0, 1}));
  EXPECT_EQ(odd[1], (std::vector<int>{2}));
}

TEST(PlatformDeviceInventory, EightLogicalCpuDevicesByDefault) {
  if (zp::count_cuda_devices() > 0) GTEST_SKIP() << "this host has GPUs";
  auto devs = zp::detect_devices({});
  ASSERT_EQ(devs.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(devs[i].kind, "cpu");
    EXPECT_EQ(devs[i].name, "cpu:" + std::to_string(i));
    EXPECT_FALSE(devs[i].cores.empty());
  }
  EXPECT_EQ(zp::detect_devices({3, ""}).size(), 3u);
  EXPECT_EQ(zp::default_kind(devs), "cpu");
}
