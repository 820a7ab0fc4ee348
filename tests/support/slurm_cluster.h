// A Slurm cluster of several nodes on this host for tests (slurm_cluster.sh beside this file:
// munged, slurmctld and one slurmd per node n1..nN on loopback, everything under one folder),
// the processes of its jobs per node, and a test suite around one such cluster. Needs nothing
// of the framework.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "support/processes.h"
#include "support/run_zenith.h"
#include "support/temp_dir.h"

namespace zenith::testing {

class SlurmCluster {
 public:
  // Starts the cluster under `dir` and points SLURM_CONF (for sbatch, srun, squeue, scancel of
  // this process and its children) at it. When Slurm cannot start here, ok() is false and
  // why() says what stopped it.
  explicit SlurmCluster(std::string dir, int nodes = 2) : dir_(std::move(dir)) {
    auto r = run_shell("bash " + script() + " start '" + dir_ + "' " + std::to_string(nodes));
    if (r.code != 0) {
      why_ = "Slurm cannot start on this host: " + r.output;
      return;
    }
    ::setenv("SLURM_CONF", conf().c_str(), 1);
  }
  ~SlurmCluster() { stop(); }
  SlurmCluster(const SlurmCluster&) = delete;
  SlurmCluster& operator=(const SlurmCluster&) = delete;

  bool ok() const { return why_.empty(); }
  const std::string& why() const { return why_; }
  std::string conf() const { return dir_ + "/slurm.conf"; }

  // Cancels the jobs, stops the daemons; afterwards processes() should be empty.
  void stop() {
    if (stopped_) return;
    stopped_ = true;
    run_shell("bash " + script() + " stop '" + dir_ + "'");
    ::unsetenv("SLURM_CONF");
  }

  // Every live process of the cluster: its daemons (the folder on their command line), the
  // step daemons and the jobs' tasks (SLURM_CONF of this cluster in their environment).
  std::vector<pid_t> processes() const {
    auto out = processes_with_env({}, dir_ + "/");
    for (pid_t p : processes_with_env({"SLURM_CONF=" + conf() + "\n"}))
      if (p != ::getpid() && std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
    return out;
  }

  // The processes of Slurm job `id` that run on `node` (srun's tasks and what they started).
  static std::vector<pid_t> job_processes(const std::string& id, const std::string& node) {
    return processes_with_env({"SLURM_JOB_ID=" + id + "\n", "SLURMD_NODENAME=" + node + "\n"});
  }
  // The step daemons of job `id`'s `step` ("slurmstepd: [id.0]"): one per node it runs on.
  // step "" = every step daemon of the job (batch step included).
  static std::vector<pid_t> step_daemons(const std::string& id, const std::string& step = "") {
    return processes_with_env({}, "slurmstepd: [" + id + "." + (step.empty() ? "" : step + "]"));
  }

 private:
  static std::string script() {
    return std::string("'") + ZENITH_SOURCE_DIR + "/tests/support/slurm_cluster.sh'";
  }

  std::string dir_;
  std::string why_;
  bool stopped_ = false;
};

// A test suite on one two-node cluster: started before its first test, stopped after its last
// and checked to leave no process behind; where Slurm cannot start, every test fails under CI
// and skips, loudly and with the reason, elsewhere.
class SlurmClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::make_unique<TempDir>("slurm");
    cluster_ = std::make_unique<SlurmCluster>(dir_->str() + "/cluster", 2);
  }
  static void TearDownTestSuite() {
    const bool started = cluster_->ok();
    cluster_->stop();
    if (started) {
      EXPECT_TRUE(wait_for([] { return cluster_->processes().empty(); }, 10))
          << cluster_->processes().size() << " processes of the cluster left after its stop";
    }
    cluster_.reset();
    dir_.reset();
  }
  // A skip in CI is a failure (the CI variable set, as CI services set it); elsewhere the skip
  // says loudly what did not run and why.
  void SetUp() override {
    if (cluster_->ok()) return;
    if (std::getenv("CI"))
      FAIL() << "CI is set and the Slurm cluster did not start: " << cluster_->why();
    std::fprintf(stderr,
                 "\n*** SKIPPED %s.%s: the Slurm tests did not run. %s\n*** (with CI set, "
                 "this fails)\n\n",
                 ::testing::UnitTest::GetInstance()->current_test_info()->test_suite_name(),
                 ::testing::UnitTest::GetInstance()->current_test_info()->name(),
                 cluster_->why().c_str());
    GTEST_SKIP() << cluster_->why();
  }

  inline static std::unique_ptr<TempDir> dir_;
  inline static std::unique_ptr<SlurmCluster> cluster_;
};

}  // namespace zenith::testing
