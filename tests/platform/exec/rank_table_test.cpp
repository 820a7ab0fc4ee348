#include "platform/exec/rank_table.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "platform/jobs/device_inventory.h"

namespace zp = zenith::platform;

TEST(PlatformRankTable, MindSporeFormatAllStrings) {
  std::vector<zp::RankInfo> ranks;
  for (int r = 0; r < 8; ++r) ranks.push_back({r, r, r, "127.0.0.1"});
  auto t = zp::make_rank_table(ranks);
  EXPECT_EQ(t["version"], "1.0");
  EXPECT_EQ(t["server_count"], "1");
  EXPECT_EQ(t["status"], "completed");
  ASSERT_EQ(t["server_list"].size(), 1u);
  EXPECT_EQ(t["server_list"][0]["server_id"], "127.0.0.1");
  const auto& devs = t["server_list"][0]["device"];
  ASSERT_EQ(devs.size(), 8u);
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(devs[r]["device_id"], std::to_string(r));
    EXPECT_EQ(devs[r]["rank_id"], std::to_string(r));
    EXPECT_EQ(devs[r]["device_ip"], "127.0.0.1");
  }
}

TEST(PlatformRankTable, GroupsRanksByHost) {
  auto t =
      zp::make_rank_table({{0, 0, 0, "10.0.0.1"}, {1, 1, 1, "10.0.0.1"}, {2, 0, 0, "10.0.0.2"}});
  EXPECT_EQ(t["server_count"], "2");
  EXPECT_EQ(t["server_list"][1]["device"][0]["rank_id"], "2");
}

TEST(PlatformRankTable, RankEnvironment) {
  zp::RankEnvContext ctx;
  ctx.job_id = "7";
  ctx.job_dir = "/d/jobs/7";
  ctx.rank_table_file = "/d/jobs/7/rank_table.json";
  ctx.master_port = 29500;
  ctx.world_size = 4;
  ctx.restart_count = 1;
  auto env = zp::rank_env(ctx, {2, 2, 5, "127.0.0.1"});
  EXPECT_EQ(env["RANK_ID"], "2");
  EXPECT_EQ(env["DEVICE_ID"], "5");
  EXPECT_EQ(env["RANK_SIZE"], "4");
  EXPECT_EQ(env["RANK"], "2");
  EXPECT_EQ(env["LOCAL_RANK"], "2");
  EXPECT_EQ(env["WORLD_SIZE"], "4");
  EXPECT_EQ(env["MASTER_ADDR"], "127.0.0.1");
  EXPECT_EQ(env["MASTER_PORT"], "29500");
  EXPECT_EQ(env["ZENITH_RESTART_COUNT"], "1");
  EXPECT_EQ(env["RANK_TABLE_FILE"], ctx.rank_table_file);
  EXPECT_GT(zp::find_free_port(), 0);
}

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
