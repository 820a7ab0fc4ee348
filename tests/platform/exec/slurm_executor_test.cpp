// The Slurm backend end to end: a one-host cluster from Debian's packages (munge, slurmctld,
// slurmd on loopback) runs a 2-rank job through sbatch/srun. Skipped, with the reason, where
// Slurm cannot start.
#include "platform/exec/slurm_executor.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "platform/jobs/controller.h"
#include "platform/jobs/job_spec.h"
#include "support/files.h"
#include "support/processes.h"
#include "support/temp_dir.h"

namespace zp = zenith::platform;
namespace zt = zenith::testing;
using zt::read_all;

namespace {

// Beside this file. (Not from __FILE__: Ninja compiles with relative paths, which did not
// resolve from the test's working directory, so the suite skipped itself everywhere.)
const std::string kCluster =
    std::string(ZENITH_SOURCE_DIR) + "/tests/platform/exec/data/slurm_cluster.sh";

class PlatformSlurmTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::make_unique<zt::TempDir>("slurm");
    auto r = zp::run_command("bash " + zp::shell_quote(kCluster) + " start " +
                             zp::shell_quote(dir_->str() + "/cluster"));
    if (r.status != 0) {
      skip_reason_ = "Slurm cannot start on this host: " + r.output;
      return;
    }
    setenv("SLURM_CONF", (dir_->str() + "/cluster/slurm.conf").c_str(), 1);
  }
  static void TearDownTestSuite() {
    zp::run_command("bash " + zp::shell_quote(kCluster) + " stop " +
                    zp::shell_quote(dir_->str() + "/cluster"));
    unsetenv("SLURM_CONF");
    dir_.reset();
  }
  void SetUp() override {
    if (!skip_reason_.empty()) {
      std::printf("SKIPPED: %s\n", skip_reason_.c_str());
      GTEST_SKIP() << skip_reason_;
    }
  }

  zp::JobRecord run_job(const std::string& yaml, std::int64_t id,
                        std::vector<std::pair<std::string, std::string>>* alerts,
                        const std::function<bool(const zp::JobRecord&)>& cancel_when = {}) {
    zp::JobRecord job;
    job.id = id;
    job.backend = "slurm";
    job.spec = zp::parse_job_spec(yaml, "slurm.yaml");
    zp::ControllerHooks hooks;
    hooks.alert = [&](const zp::JobRecord&, const std::string& k, const std::string& m) {
      alerts->push_back({k, m});
    };
    zp::JobController c(job, paths(id), {}, hooks);
    c.start({});
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!c.tick()) {
      if (cancel_when && cancel_when(c.job())) {
        c.cancel("cancelled by test");
        break;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        c.cancel("deadline");
        ADD_FAILURE() << "slurm job did not finish in 60 s";
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return c.job();
  }
  zp::JobPaths paths(std::int64_t id) { return {dir_->str() + "/jobs/" + std::to_string(id)}; }

  static std::unique_ptr<zt::TempDir> dir_;
  static std::string skip_reason_;
};

std::unique_ptr<zt::TempDir> PlatformSlurmTest::dir_;
std::string PlatformSlurmTest::skip_reason_;

}  // namespace

TEST_F(PlatformSlurmTest, TwoRankJobRunsThroughSbatchWithTheRankEnvironment) {
  std::vector<std::pair<std::string, std::string>> alerts;
  auto job = run_job(R"(job:
  name: slurm-two
  resources: { npu: 2 }
  env: { GREETING: hello }
  entry: 'echo "$GREETING RANK_ID=$RANK_ID DEVICE_ID=$DEVICE_ID RANK_SIZE=$RANK_SIZE WORLD_SIZE=$WORLD_SIZE LOCAL_RANK=$LOCAL_RANK MASTER_PORT=$MASTER_PORT"; test -f "$RANK_TABLE_FILE"'
)",
                     1, &alerts);
  ASSERT_EQ(job.state, zp::JobState::Succeeded) << job.reason << "\n"
                                                << read_all(paths(1).rank_log(0));
  EXPECT_FALSE(job.external_id.empty());
  for (int r = 0; r < 2; ++r) {
    std::string log = read_all(paths(1).rank_log(r));
    EXPECT_NE(log.find("[INFO] Rank " + std::to_string(r) + " started"), std::string::npos) << log;
    EXPECT_NE(log.find("hello RANK_ID=" + std::to_string(r) + " DEVICE_ID=" + std::to_string(r) +
                       " RANK_SIZE=2 WORLD_SIZE=2 LOCAL_RANK=" + std::to_string(r)),
              std::string::npos)
        << log;
  }
  auto table = nlohmann::json::parse(read_all(paths(1).rank_table()));
  EXPECT_EQ(table["version"], "1.0");
  EXPECT_EQ(table["server_count"], "1");
  EXPECT_EQ(table["server_list"][0]["device"].size(), 2u);
  EXPECT_EQ(table["server_list"][0]["device"][1]["rank_id"], "1");
  EXPECT_TRUE(alerts.empty());
}

TEST_F(PlatformSlurmTest, FailingRankFailsTheJobAndScancelStopsOthers) {
  std::vector<std::pair<std::string, std::string>> alerts;
  auto job = run_job(R"(job:
  resources: { npu: 2 }
  entry: 'if [ "$RANK_ID" = 1 ]; then echo slurm boom; exit 5; fi; sleep 60'
)",
                     2, &alerts);
  EXPECT_EQ(job.state, zp::JobState::Failed);
  ASSERT_FALSE(alerts.empty());
  EXPECT_EQ(alerts.back().first, "abnormal_exit");
  auto q = zp::run_command("squeue -h -j " + job.external_id);
  EXPECT_EQ(q.output.find("zenith"), std::string::npos) << q.output;
}

TEST_F(PlatformSlurmTest, CancelUsesScancel) {
  std::vector<std::pair<std::string, std::string>> alerts;
  auto job = run_job("job:\n  resources: { npu: 2 }\n  entry: echo up; sleep 120\n", 3, &alerts,
                     [&](const zp::JobRecord&) {
                       return read_all(paths(3).rank_log(1)).find("up") != std::string::npos;
                     });
  EXPECT_EQ(job.state, zp::JobState::Cancelled);
  EXPECT_TRUE(zt::wait_for(
      [&] {
        return zp::run_command("squeue -h -j " + job.external_id).output.find("zenith") ==
               std::string::npos;
      },
      15));
  EXPECT_TRUE(zt::wait_for(
      [&] { return zt::processes_with_env("ZENITH_JOB_DIR=" + paths(3).job_dir + "\n").empty(); },
      15));
}
