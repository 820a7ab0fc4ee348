// The MindSpore rank table and the rank environment (MindSpore and torchrun variables).
#include "platform/exec/rank_table.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

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

// Ranks sharing cores do not spin against each other; threads match the cores given.
TEST(PlatformRankTable, ThreadEnvironmentFollowsTheCores) {
  auto alone = zp::thread_env(4, false);
  EXPECT_EQ(alone["OMP_NUM_THREADS"], "4");
  EXPECT_EQ(alone["ZENITH_NUM_THREADS"], "4");
  EXPECT_EQ(alone["GOMP_SPINCOUNT"], "30000");
  EXPECT_EQ(alone.count("OMP_WAIT_POLICY"), 0u);
  auto shared = zp::thread_env(1, true);
  EXPECT_EQ(shared["OMP_NUM_THREADS"], "1");
  EXPECT_EQ(shared["OMP_WAIT_POLICY"], "PASSIVE");
  EXPECT_EQ(zp::thread_env(0, true)["OMP_NUM_THREADS"], "1");
}
