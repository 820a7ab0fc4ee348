// The local executor driven by a JobController, as `zenith run` and the server use it.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "platform/exec/isolation.h"
#include "platform/jobs/controller.h"
#include "platform/jobs/device_inventory.h"
#include "platform/jobs/job_spec.h"
#include "support/files.h"
#include "support/processes.h"
#include "support/temp_dir.h"

namespace zp = zenith::platform;
namespace zt = zenith::testing;
using zt::read_all;

namespace {

struct RunResult {
  zp::JobRecord job;
  std::vector<std::pair<std::string, std::string>> alerts;
  double seconds = 0;
  bool has_alert(const std::string& kind) const {
    for (const auto& a : alerts)
      if (a.first == kind) return true;
    return false;
  }
  std::string alert(const std::string& kind) const {
    for (const auto& a : alerts)
      if (a.first == kind) return a.second;
    return "";
  }
};

class PlatformExecutorTest : public ::testing::Test {
 protected:
  zt::TempDir dir_{"executor"};
  int next_id_ = 1;

  zp::JobPaths paths(std::int64_t id) { return {dir_.str() + "/jobs/" + std::to_string(id)}; }

  // Runs a job to its end (or until `on_tick` returns true, then cancels it).
  RunResult run(const std::string& yaml,
                const std::function<bool(const zp::JobRecord&)>& on_tick = {},
                zp::ControllerOptions options = {}) {
    zp::JobRecord job;
    job.id = next_id_++;
    job.spec = zp::parse_job_spec(yaml, "test.yaml");
    auto devices = zp::detect_devices({});
    devices.resize(job.spec.devices);
    for (const auto& d : devices) job.devices.push_back(d.index);
    RunResult result;
    zp::ControllerHooks hooks;
    hooks.alert = [&](const zp::JobRecord&, const std::string& kind, const std::string& msg) {
      result.alerts.push_back({kind, msg});
    };
    options.grace_s = 2;
    options.quota_interval_s = 0.2;
    zp::JobController c(job, paths(job.id), options, hooks);
    auto start = std::chrono::steady_clock::now();
    c.start(devices);
    auto deadline = start + std::chrono::seconds(60);
    while (!c.tick()) {
      if (on_tick && on_tick(c.job())) {
        c.cancel("cancelled by test");
        break;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        c.cancel("test deadline");
        ADD_FAILURE() << "job did not finish in 60 s";
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    result.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    result.job = c.job();
    return result;
  }

  std::vector<pid_t> leftovers(std::int64_t id) {
    return zt::processes_with_env("ZENITH_JOB_DIR=" + paths(id).job_dir + "\n");
  }

  void TearDown() override { zt::kill_all_with_env("ZENITH_JOB_DIR=" + dir_.str()); }
};

}  // namespace

TEST_F(PlatformExecutorTest, SeedJobRunsEightRanksWithRankEnvironment) {
  const std::string yaml = R"(job:
  name: cifar10-training
  framework: mindspore
  resources: { npu: 8, memory: 64Gi, storage: 100Gi }
  entry: env | grep -E '^(RANK_ID|DEVICE_ID|RANK_SIZE|RANK_TABLE_FILE|RANK|LOCAL_RANK|WORLD_SIZE|MASTER_ADDR|MASTER_PORT|ZENITH_[A-Z_]+)=' | sort > "$ZENITH_JOB_DIR/env_$RANK_ID"; echo "hello from rank $RANK_ID"
)";
  RunResult r = run(yaml);
  ASSERT_EQ(r.job.state, zp::JobState::Succeeded) << r.job.reason;
  ASSERT_EQ(r.job.ranks.size(), 8u);
  std::set<std::string> rank_ids, device_ids, ports;
  for (int rank = 0; rank < 8; ++rank) {
    std::string env = read_all(paths(1).job_dir + "/env_" + std::to_string(rank));
    EXPECT_NE(env.find("RANK_ID=" + std::to_string(rank) + "\n"), std::string::npos) << env;
    EXPECT_NE(env.find("RANK=" + std::to_string(rank) + "\n"), std::string::npos);
    EXPECT_NE(env.find("LOCAL_RANK=" + std::to_string(rank) + "\n"), std::string::npos);
    EXPECT_NE(env.find("RANK_SIZE=8\n"), std::string::npos);
    EXPECT_NE(env.find("WORLD_SIZE=8\n"), std::string::npos);
    EXPECT_NE(env.find("MASTER_ADDR=127.0.0.1\n"), std::string::npos);
    EXPECT_NE(env.find("ZENITH_RESTART_COUNT=0\n"), std::string::npos);
    EXPECT_NE(env.find("RANK_TABLE_FILE=" + paths(1).rank_table() + "\n"), std::string::npos);
    auto grab = [&](const std::string& key) {
      auto p = env.find("\n" + key + "=");
      if (p == std::string::npos && env.rfind(key + "=", 0) == 0) p = -1;
      auto start = env.find('=', p + 1) + 1;
      return env.substr(start, env.find('\n', start) - start);
    };
    rank_ids.insert(grab("RANK_ID"));
    device_ids.insert(grab("DEVICE_ID"));
    ports.insert(grab("MASTER_PORT"));
    const std::string log = read_all(paths(1).rank_log(rank));
    EXPECT_NE(log.find("[INFO] Rank " + std::to_string(rank) + " started (pid " +
                       std::to_string(r.job.ranks[rank].pid) + ", device cpu:"),
              std::string::npos)
        << log;
    EXPECT_NE(log.find("Z hello from rank " + std::to_string(rank)), std::string::npos) << log;
  }
  EXPECT_EQ(rank_ids.size(), 8u);
  EXPECT_EQ(device_ids.size(), 8u);
  EXPECT_EQ(ports.size(), 1u);
  auto table = nlohmann::json::parse(read_all(paths(1).rank_table()));
  EXPECT_EQ(table["version"], "1.0");
  EXPECT_EQ(table["server_count"], "1");
  ASSERT_EQ(table["server_list"][0]["device"].size(), 8u);
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(table["server_list"][0]["device"][i]["rank_id"], std::to_string(i));
  EXPECT_TRUE(r.alerts.empty());
  EXPECT_TRUE(leftovers(1).empty());
}

TEST_F(PlatformExecutorTest, FailingRankStopsSiblingsAndRaisesAbnormalExit) {
  RunResult r = run(R"(job:
  resources: { npu: 3 }
  entry: 'if [ "$RANK_ID" = 1 ]; then echo "boom on rank 1"; exit 3; fi; sleep 60'
)");
  EXPECT_EQ(r.job.state, zp::JobState::Failed);
  EXPECT_EQ(r.job.exit_code.value_or(-1), 3);
  EXPECT_EQ(r.job.reason, "rank 1 exited with code 3");
  EXPECT_LT(r.seconds, 10);
  ASSERT_TRUE(r.has_alert("abnormal_exit"));
  EXPECT_NE(r.alert("abnormal_exit").find("boom on rank 1"), std::string::npos);
  EXPECT_FALSE(r.has_alert("oom"));
  EXPECT_TRUE(leftovers(1).empty());
}

TEST_F(PlatformExecutorTest, AllocationPastTheMemoryLimitRaisesOom) {
  // The shell keeps the command substitution's output in memory: ~300 MB against 64 MiB.
  RunResult r = run(R"(job:
  resources: { npu: 1, memory: 64Mi }
  entry: 'echo allocating; x=$(head -c 300000000 /dev/zero | tr "\0" a); echo survived'
)");
  EXPECT_EQ(r.job.state, zp::JobState::Failed);
  EXPECT_TRUE(r.has_alert("oom")) << "isolation: " << zp::isolation_support().describe();
  EXPECT_NE(r.job.reason.find("out of memory"), std::string::npos) << r.job.reason;
  EXPECT_EQ(read_all(paths(1).rank_log(0)).find("survived"), std::string::npos);
}

TEST_F(PlatformExecutorTest, MemoryIsALimitPerRank) {
  // dd's buffer of 100 MB in each of 2 ranks under `memory: 160Mi`: together they exceed it,
  // each fits. Rank 1 then asks for 300 MB: out of memory, the alert naming the rank and limit.
  RunResult r = run(R"(job:
  resources: { npu: 2, memory: 160Mi }
  entry: 'echo "arenas $MALLOC_ARENA_MAX"; dd if=/dev/zero of=/dev/null bs=100M count=10 && echo held; [ "$RANK_ID" = 1 ] && { dd if=/dev/zero of=/dev/null bs=300M count=1 || exit 1; }; echo survived'
)");
  EXPECT_EQ(r.job.state, zp::JobState::Failed);
  const std::string log0 = read_all(paths(1).rank_log(0)), log1 = read_all(paths(1).rank_log(1));
  EXPECT_NE(log0.find("arenas 1"), std::string::npos) << log0;
  EXPECT_NE(log0.find("survived"), std::string::npos) << log0;
  EXPECT_NE(log1.find("held"), std::string::npos) << log1;
  EXPECT_EQ(log1.find("survived"), std::string::npos) << log1;
  EXPECT_TRUE(r.has_alert("oom")) << "isolation: " << zp::isolation_support().describe();
  EXPECT_NE(r.job.reason.find("rank 1"), std::string::npos) << r.job.reason;
  EXPECT_NE(r.job.reason.find("out of memory (limit 160Mi per rank)"), std::string::npos)
      << r.job.reason;
}

TEST_F(PlatformExecutorTest, CancelKillsTheWholeProcessTree) {
  // Background children, a grandchild in its own session, and a TERM-ignoring loop.
  RunResult r = run(R"(job:
  resources: { npu: 2 }
  entry: 'sleep 300 & setsid sleep 300 & trap "" TERM; echo ready; while true; do sleep 1; done'
)",
                    [&](const zp::JobRecord&) {
                      return read_all(paths(1).rank_log(1)).find("ready") != std::string::npos &&
                             leftovers(1).size() >= 6;  // per rank: sh and its two sleeps
                    });
  EXPECT_EQ(r.job.state, zp::JobState::Cancelled);
  EXPECT_TRUE(zt::wait_for([&] { return leftovers(1).empty(); }, 3))
      << leftovers(1).size() << " processes left";
}

TEST_F(PlatformExecutorTest, MaxRestartsRestartsTheJobWithItsCount) {
  RunResult r = run(R"(job:
  resources: { npu: 2 }
  max_restarts: 2
  entry: 'echo "attempt $ZENITH_RESTART_COUNT"; [ "$ZENITH_RESTART_COUNT" = 2 ] || exit 1'
)");
  EXPECT_EQ(r.job.state, zp::JobState::Succeeded) << r.job.reason;
  EXPECT_EQ(r.job.restart_count, 2);
  std::string log = read_all(paths(1).rank_log(0));
  EXPECT_NE(log.find("attempt 0"), std::string::npos);
  EXPECT_NE(log.find("attempt 2"), std::string::npos);
  EXPECT_NE(log.find("restart 1 of 2"), std::string::npos);
}

TEST_F(PlatformExecutorTest, TimeoutStopsTheJob) {
  RunResult r = run("job:\n  timeout: 1s\n  entry: sleep 60\n");
  EXPECT_EQ(r.job.state, zp::JobState::Failed);
  EXPECT_NE(r.job.reason.find("timeout"), std::string::npos);
  EXPECT_LT(r.seconds, 8);
  EXPECT_TRUE(leftovers(1).empty());
}

TEST_F(PlatformExecutorTest, OverQuotaStopsTheJobWithAReason) {
  RunResult r = run(R"(job:
  resources: { npu: 1, storage: 1Mi }
  entry: 'head -c 4000000 /dev/urandom > big.bin; sync; sleep 60'
)");
  EXPECT_EQ(r.job.state, zp::JobState::Failed);
  EXPECT_NE(r.job.reason.find("over storage quota"), std::string::npos) << r.job.reason;
  EXPECT_TRUE(r.has_alert("over_quota"));
  EXPECT_TRUE(leftovers(1).empty());
}

TEST_F(PlatformExecutorTest, SilentJobRaisesHangAlert) {
  RunResult r = run("job:\n  hang_timeout: 1s\n  entry: sleep 2.5; echo done\n");
  EXPECT_EQ(r.job.state, zp::JobState::Succeeded);
  EXPECT_TRUE(r.has_alert("hang"));
}

TEST_F(PlatformExecutorTest, HeartbeatKeepsAQuietJobFromLookingHung) {
  RunResult r = run(R"(job:
  hang_timeout: 2s
  entry: 'for i in 1 2 3 4 5 6 7 8 9; do touch "$ZENITH_HEARTBEAT_FILE"; sleep 0.3; done'
)");
  EXPECT_EQ(r.job.state, zp::JobState::Succeeded);
  EXPECT_FALSE(r.has_alert("hang"));
  EXPECT_TRUE(std::filesystem::is_symlink(paths(1).logs_dir() + "/job.log"));
}

TEST_F(PlatformExecutorTest, WorkingDirAndEnvFromTheSpec) {
  std::filesystem::create_directories(dir_.path() / "wd");
  RunResult r = run("job:\n  working_dir: " + (dir_.path() / "wd").string() +
                    "\n  env: { GREETING: hi }\n  entry: echo \"$GREETING\" > out.txt\n");
  EXPECT_EQ(r.job.state, zp::JobState::Succeeded);
  EXPECT_EQ(read_all((dir_.path() / "wd" / "out.txt").string()), "hi\n");
}

// A rank SIGKILLed and its peer that exits 1 once it sees the rank gone, as a peer does on a
// lost connection: the job names the killed rank whichever rank it is and whichever end lands
// first (the peer's exit can be written before the kill; the killed rank's shim then still
// drains its log for 2 s, held open by a child).
TEST_F(PlatformExecutorTest, TheKilledRankIsBlamedNotThePeerThatLostIt) {
  for (int victim : {1, 0}) {
    for (const char* peer_delay : {"0", "0.3"}) {
      SCOPED_TRACE("victim rank " + std::to_string(victim) + ", peer exits " + peer_delay +
                   " s after");
      const std::string mark = dir_.str() + "/killed_" + std::to_string(next_id_);
      RunResult r = run(
          "job:\n  resources: { npu: 2 }\n  entry: 'if [ \"$RANK\" = " + std::to_string(victim) +
          " ]; then (sleep 4; echo late) & sleep 0.3; touch " + mark +
          "; kill -9 $$; fi; while [ ! -e " + mark + " ]; do sleep 0.02; done; sleep " +
          peer_delay + "; echo \"peer lost\"; exit 1'\n");
      EXPECT_EQ(r.job.state, zp::JobState::Failed);
      EXPECT_EQ(r.job.reason,
                "rank " + std::to_string(victim) + " was killed by signal 9 (Killed)");
      ASSERT_TRUE(r.has_alert("abnormal_exit"));
      EXPECT_NE(r.alert("abnormal_exit").find("rank " + std::to_string(victim) + " was killed"),
                std::string::npos)
          << r.alert("abnormal_exit");
    }
  }
}

// A rank's shim is a fork of the server without exec: ps must not show it as the server.
TEST_F(PlatformExecutorTest, PsShowsARankAsZenithRankWithItsJobAndRank) {
  std::vector<std::string> cmdlines;
  RunResult r = run("job:\n  resources: { npu: 2 }\n  entry: 'echo up; sleep 30'\n",
                    [&](const zp::JobRecord& job) {
                      if (read_all(paths(1).rank_log(1)).find(" up") == std::string::npos ||
                          read_all(paths(1).rank_log(0)).find(" up") == std::string::npos)
                        return false;
                      for (const auto& rank : job.ranks) {
                        std::string raw =
                            read_all("/proc/" + std::to_string(rank.pid) + "/cmdline");
                        // NUL-separated words, padded with NULs to the server's argv length.
                        while (!raw.empty() && raw.back() == '\0') raw.pop_back();
                        std::replace(raw.begin(), raw.end(), '\0', ' ');
                        cmdlines.push_back(raw);
                      }
                      return true;
                    });
  EXPECT_EQ(r.job.state, zp::JobState::Cancelled);
  EXPECT_EQ(cmdlines, (std::vector<std::string>{"zenith rank 1 0", "zenith rank 1 1"}));
}
