#include "platform/jobs/job_store.h"

#include <gtest/gtest.h>

#include "support/temp_dir.h"

namespace zp = zenith::platform;

using zenith::testing::TempDir;

TEST(PlatformJobStore, JobsAndAlertsSurviveReopen) {
  TempDir dir("job_store");
  const std::string db = dir / "zenith.db";
  std::int64_t id = 0;
  {
    zp::JobStore store(db);
    zp::JobRecord j;
    j.spec.name = "a";
    j.spec.entry = "true";
    j.spec.devices = 2;
    j.yaml = "job: {entry: 'true'}";
    j.submitted_at = 1;
    store.insert_job(j);
    id = j.id;
    EXPECT_GT(id, 0);
    j.state = zp::JobState::Running;
    j.devices = {3, 4};
    j.ranks = {{0, 3, "127.0.0.1", 111, 222, "running", 0},
               {1, 4, "127.0.0.1", 112, 223, "running", 0}};
    j.cgroup = "/sys/fs/cgroup/x";
    store.update_job(j);
    zp::JobRecord k;
    k.spec.entry = "x";
    store.insert_job(k);
    zp::Alert a;
    a.job_id = id;
    a.kind = "oom";
    a.message = "killed";
    store.add_alert(a);
    EXPECT_GT(a.id, 0);
  }
  EXPECT_TRUE(std::filesystem::exists(db + "-wal") || std::filesystem::exists(db));
  zp::JobStore store(db);
  auto j = store.get_job(id);
  ASSERT_TRUE(j.has_value());
  EXPECT_EQ(j->state, zp::JobState::Running);
  EXPECT_EQ(j->devices, (std::vector<int>{3, 4}));
  ASSERT_EQ(j->ranks.size(), 2u);
  EXPECT_EQ(j->ranks[1].pid, 112);
  EXPECT_EQ(j->ranks[1].start_time, 223);
  EXPECT_EQ(j->cgroup, "/sys/fs/cgroup/x");
  EXPECT_EQ(j->spec.devices, 2);
  EXPECT_EQ(store.list_jobs().size(), 2u);
  EXPECT_EQ(store.list_jobs(zp::JobState::Running).size(), 1u);
  EXPECT_EQ(store.list_jobs(zp::JobState::Pending).size(), 1u);
  EXPECT_FALSE(store.get_job(9999).has_value());
  auto alerts = store.list_alerts(id);
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].kind, "oom");
  EXPECT_TRUE(store.list_alerts(id + 1).empty());
}

TEST(PlatformJobStore, UsesWriteAheadLogging) {
  TempDir dir("job_store");
  const std::string db = dir / "zenith.db";
  zp::JobStore store(db);
  zp::JobRecord j;
  j.spec.entry = "x";
  store.insert_job(j);
  EXPECT_TRUE(std::filesystem::exists(db + "-wal"));
}

TEST(PlatformJobStore, UnopenablePathNamesTheFile) {
  try {
    zp::JobStore store("/nonexistent-dir/zenith.db");
    FAIL();
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("[store] cannot open /nonexistent-dir/zenith.db"),
              std::string::npos);
  }
}

// Retention picks finished jobs that are old or beyond the newest N; pruning drops their alerts
// and keeps the record. The scheduler's per-tick queries walk an index, never the whole table.
TEST(PlatformJobStore, PruneCandidatesAndIndexedHotQueries) {
  TempDir dir("job_store");
  zp::JobStore store(dir / "zenith.db");
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 5; ++i) {
    zp::JobRecord j;
    j.spec.entry = "x";
    store.insert_job(j);
    j.state = i == 4 ? zp::JobState::Running : zp::JobState::Succeeded;
    j.finished_at = i == 4 ? 0 : 100.0 * (i + 1);  // 100, 200, 300, 400; one running
    store.update_job(j);
    zp::Alert a;
    a.job_id = j.id;
    a.kind = "k";
    a.message = "m";
    store.add_alert(a);
    ids.push_back(j.id);
  }
  // Older than 250: the first two. Keep 3: the oldest finished one too (already in).
  EXPECT_EQ(store.prune_candidates(250, 3), (std::vector<std::int64_t>{ids[0], ids[1]}));
  // Keep only the newest finished one: all finished but the one at 400.
  EXPECT_EQ(store.prune_candidates(0, 1), (std::vector<std::int64_t>{ids[0], ids[1], ids[2]}));
  store.prune_job(ids[0]);
  EXPECT_TRUE(store.list_alerts(ids[0]).empty());
  EXPECT_EQ(store.list_alerts(ids[1]).size(), 1u);
  EXPECT_TRUE(store.get_job(ids[0]).has_value());
  EXPECT_EQ(store.prune_candidates(250, 3), (std::vector<std::int64_t>{ids[1]}));  // once only
  EXPECT_EQ(store.active_since(350).size(), 2u);  // the running one and the one at 400
  EXPECT_EQ(store.recent_alerts(2).size(), 2u);
  EXPECT_EQ(store.recent_alerts(2)[0].job_id, ids[4]);
  EXPECT_EQ(store.count_by_state()["succeeded"], 4);

  for (const std::string& plan : store.hot_query_plans()) {
    EXPECT_NE(plan.find("INDEX"), std::string::npos) << plan;
    EXPECT_EQ(plan.find("SCAN jobs |"), std::string::npos) << plan;
    EXPECT_FALSE(plan.size() >= 9 && plan.compare(plan.size() - 9, 9, "SCAN jobs") == 0) << plan;
  }
}
