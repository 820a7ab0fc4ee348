// The Slurm backend end to end on a two-node cluster from Debian's packages: munged, slurmctld
// and two slurmd (n1, n2) on loopback (tests/support/slurm_cluster.sh). Jobs of 2 nodes x 2
// ranks get their places, one master and a rank table of two servers; a rank dying on one node
// fails the job on both; cancel leaves no process on either node; the partition's size bounds
// what is accepted; the server ingests every node's metrics and `zenith job` shows each rank's
// node. Where Slurm cannot start: a failure under CI, a loud skip elsewhere.
#include "platform/exec/slurm_executor.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "platform/jobs/controller.h"
#include "platform/jobs/job_manager.h"
#include "platform/jobs/job_spec.h"
#include "platform/telemetry/telemetry_ingest.h"
#include "support/files.h"
#include "support/processes.h"
#include "support/server_process.h"
#include "support/slurm_cluster.h"
#include "support/temp_dir.h"

namespace zp = zenith::platform;
namespace zt = zenith::testing;
using zt::read_all;

namespace {

using Alerts = std::vector<std::pair<std::string, std::string>>;

class PlatformSlurmTest : public zt::SlurmClusterTest {
 protected:
  // Runs the job through a controller until it ends; `during` sees the job on every tick and
  // returns true to cancel it.
  zp::JobRecord run_job(const std::string& yaml, std::int64_t id, Alerts* alerts,
                        const std::function<bool(const zp::JobRecord&)>& during = {}) {
    zp::JobRecord job;
    job.id = id;
    job.backend = "slurm";
    job.spec = zp::parse_job_spec(yaml, "slurm.yaml");
    zp::ControllerHooks hooks;
    hooks.alert = [&](const zp::JobRecord&, const std::string& k, const std::string& m) {
      alerts->push_back({k, m});
    };
    zp::ControllerOptions options;
    options.grace_s = 1;
    zp::JobController c(job, paths(id), options, hooks);
    c.start({});
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!c.tick()) {
      if (during && during(c.job())) {
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
  // True once every rank's log holds `text`.
  bool all_logs_have(std::int64_t id, int ranks, const std::string& text) {
    for (int r = 0; r < ranks; ++r)
      if (read_all(paths(id).rank_log(r)).find(text) == std::string::npos) return false;
    return true;
  }
  static bool nothing_left(const std::string& slurm_id) {
    return zt::SlurmCluster::job_processes(slurm_id, "n1").empty() &&
           zt::SlurmCluster::job_processes(slurm_id, "n2").empty() &&
           zt::SlurmCluster::step_daemons(slurm_id).empty();
  }
};

}  // namespace

TEST_F(PlatformSlurmTest, TwoRankJobRunsThroughSbatchWithTheRankEnvironment) {
  Alerts alerts;
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
  EXPECT_EQ(table["server_list"][0]["server_id"], "127.0.0.1");  // n1's address
  EXPECT_EQ(table["server_list"][0]["device"].size(), 2u);
  EXPECT_EQ(table["server_list"][0]["device"][1]["rank_id"], "1");
  EXPECT_TRUE(alerts.empty());
}

TEST_F(PlatformSlurmTest, TwoNodesOfTwoRanksGetTheirPlacesAndOneMaster) {
  Alerts alerts;
  auto job = run_job(R"(job:
  name: two-nodes
  resources: { nodes: 2, npu: 2 }
  entry: 'echo "PLACE RANK=$RANK RANK_ID=$RANK_ID NODE_RANK=$NODE_RANK LOCAL_RANK=$LOCAL_RANK DEVICE_ID=$DEVICE_ID WORLD_SIZE=$WORLD_SIZE RANK_SIZE=$RANK_SIZE MASTER=$MASTER_ADDR:$MASTER_PORT ON=$SLURMD_NODENAME LISTEN=$ZENITH_COMM_ADDR"'
)",
                     2, &alerts);
  ASSERT_EQ(job.state, zp::JobState::Succeeded) << job.reason << "\n"
                                                << read_all(paths(2).rank_log(0));
  // The port follows from the Slurm job id, the same on every node.
  EXPECT_EQ(job.master_port, 20000 + std::stoll(job.external_id) % 10000);
  ASSERT_EQ(job.ranks.size(), 4u);
  for (int r = 0; r < 4; ++r) {
    const std::string node = "n" + std::to_string(r / 2 + 1);
    const std::string log = read_all(paths(2).rank_log(r));
    const std::string rank = std::to_string(r), local = std::to_string(r % 2);
    EXPECT_NE(log.find("PLACE RANK=" + rank + " RANK_ID=" + rank +
                       " NODE_RANK=" + std::to_string(r / 2) + " LOCAL_RANK=" + local +
                       " DEVICE_ID=" + local + " WORLD_SIZE=4 RANK_SIZE=4 MASTER=127.0.0.1:" +
                       std::to_string(job.master_port) + " ON=" + node + " LISTEN=127.0.0.1"),
              std::string::npos)
        << log;
    EXPECT_NE(log.find("node " + node + " 127.0.0.1"), std::string::npos) << log;
    // The server knows where each rank ran (zenith job, the dashboard).
    EXPECT_EQ(job.ranks[r].host, node);
    EXPECT_EQ(job.ranks[r].device, r % 2);
    EXPECT_EQ(job.ranks[r].state, "exited");
  }
  // One server per node; both nodes share 127.0.0.1 here, so they are named by node name.
  auto table = nlohmann::json::parse(read_all(paths(2).rank_table()));
  EXPECT_EQ(table["server_count"], "2");
  ASSERT_EQ(table["server_list"].size(), 2u);
  for (int s = 0; s < 2; ++s) {
    const auto& server = table["server_list"][s];
    EXPECT_EQ(server["server_id"], "n" + std::to_string(s + 1));
    ASSERT_EQ(server["device"].size(), 2u);
    for (int d = 0; d < 2; ++d) {
      EXPECT_EQ(server["device"][d]["device_id"], std::to_string(d));
      EXPECT_EQ(server["device"][d]["device_ip"], "127.0.0.1");
      EXPECT_EQ(server["device"][d]["rank_id"], std::to_string(s * 2 + d));
    }
  }
  EXPECT_TRUE(alerts.empty());
}

TEST_F(PlatformSlurmTest, TheJobIsRefusedWhenThePartitionCannotHoldIt) {
  // The cluster as the teardown check sees it: munged, slurmctld and a slurmd per node.
  EXPECT_GE(cluster_->processes().size(), 4u);
  EXPECT_EQ(zp::run_command("sinfo -h -N -o '%N %t'").output, "n1 idle\nn2 idle\n");
  auto partition = zp::slurm_partition_nodes("");
  ASSERT_TRUE(partition.has_value());
  EXPECT_EQ(partition->name, "debug");
  EXPECT_EQ(partition->cpus, (std::vector<int>{2, 2}));
  EXPECT_FALSE(zp::slurm_partition_nodes("nosuch").has_value());

  Alerts alerts;
  auto too_many_nodes =
      run_job("job:\n  resources: { nodes: 3, npu: 1 }\n  entry: 'true'\n", 3, &alerts);
  EXPECT_EQ(too_many_nodes.state, zp::JobState::Failed);
  EXPECT_EQ(too_many_nodes.reason,
            "[slurm] the job asks for 3 nodes but Slurm partition 'debug' has 2");
  EXPECT_TRUE(too_many_nodes.external_id.empty());  // never reached sbatch
  auto too_many_ranks =
      run_job("job:\n  resources: { nodes: 2, npu: 3 }\n  entry: 'true'\n", 4, &alerts);
  EXPECT_EQ(too_many_ranks.state, zp::JobState::Failed);
  EXPECT_NE(too_many_ranks.reason.find("asks for 3 cpu devices on each of 2 nodes but 0 of the 2 "
                                       "nodes of Slurm partition 'debug' have 3 CPUs"),
            std::string::npos)
      << too_many_ranks.reason;
}

TEST_F(PlatformSlurmTest, ARankKilledOnOneNodeFailsTheJobOnBoth) {
  Alerts alerts;
  std::string slurm_id;
  std::chrono::steady_clock::time_point killed_at;
  auto job = run_job(R"(job:
  resources: { nodes: 2, npu: 2 }
  entry: 'echo "up $RANK"; sleep 120'
)",
                     5, &alerts, [&](const zp::JobRecord& j) {
                       if (!slurm_id.empty() || !all_logs_have(5, 4, "up ")) return false;
                       slurm_id = j.external_id;
                       // Rank 3 runs on n2: SIGKILL its entry's sleep.
                       auto victims = zt::processes_with_env(
                           {"ZENITH_JOB_DIR=" + paths(5).job_dir + "\n", "RANK=3\n"}, "sleep 120");
                       victims.erase(std::remove_if(victims.begin(), victims.end(),
                                                    [](pid_t p) {
                                                      return read_all("/proc/" + std::to_string(p) +
                                                                      "/comm") != "sleep\n";
                                                    }),
                                     victims.end());
                       EXPECT_EQ(victims.size(), 1u);
                       for (pid_t p : victims) kill(p, SIGKILL);
                       killed_at = std::chrono::steady_clock::now();
                       return false;
                     });
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  ASSERT_FALSE(slurm_id.empty());
  EXPECT_EQ(job.state, zp::JobState::Failed);
  EXPECT_EQ(job.reason, "rank 3 on node n2 was killed by signal 9");
  EXPECT_LT(took, 20) << "the job took " << took << " s to fail after the kill";
  ASSERT_FALSE(alerts.empty());
  EXPECT_EQ(alerts.back().first, "abnormal_exit");
  EXPECT_NE(alerts.back().second.find("rank 3 on node n2 was killed by signal 9"),
            std::string::npos)
      << alerts.back().second;
  // Every rank on both nodes is gone: tasks, their children, the step daemons.
  EXPECT_TRUE(zt::wait_for([&] { return nothing_left(slurm_id); }, 15));
  for (int r = 0; r < 3; ++r) EXPECT_EQ(job.ranks[r].state, "signaled") << r;
}

TEST_F(PlatformSlurmTest, CancelReachesEveryNodeAndLeavesNoProcess) {
  Alerts alerts;
  std::string slurm_id;
  std::size_t step_daemons = 0, on_n1 = 0, on_n2 = 0;
  auto job = run_job(R"(job:
  resources: { nodes: 2, npu: 2 }
  entry: 'echo up; sleep 120'
)",
                     6, &alerts, [&](const zp::JobRecord& j) {
                       if (!all_logs_have(6, 4, " up")) return false;
                       slurm_id = j.external_id;
                       step_daemons = zt::SlurmCluster::step_daemons(slurm_id, "0").size();
                       on_n1 = zt::SlurmCluster::job_processes(slurm_id, "n1").size();
                       on_n2 = zt::SlurmCluster::job_processes(slurm_id, "n2").size();
                       return true;
                     });
  EXPECT_EQ(job.state, zp::JobState::Cancelled);
  ASSERT_FALSE(slurm_id.empty());
  EXPECT_EQ(step_daemons, 2u);  // the srun step ran on both nodes
  EXPECT_GE(on_n1, 2u);
  EXPECT_GE(on_n2, 2u);
  EXPECT_TRUE(zt::wait_for([&] { return nothing_left(slurm_id); }, 15));
  EXPECT_TRUE(zp::run_command("squeue -h -j " + slurm_id).output.find("zenith") ==
              std::string::npos);
  EXPECT_TRUE(zt::processes_with_env("ZENITH_JOB_DIR=" + paths(6).job_dir + "\n").empty());
}

TEST_F(PlatformSlurmTest, ARestartIsANewAllocation) {
  Alerts alerts;
  auto job = run_job(R"(job:
  resources: { nodes: 2, npu: 1 }
  max_restarts: 1
  entry: 'if [ "$ZENITH_RESTART_COUNT" = 0 ] && [ "$RANK" = 1 ]; then exit 3; fi; echo "attempt $ZENITH_RESTART_COUNT"'
)",
                     7, &alerts);
  EXPECT_EQ(job.state, zp::JobState::Succeeded) << job.reason;
  EXPECT_EQ(job.restart_count, 1);
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_NE(alerts[0].second.find("rank 1 on node n2 exited with code 3"), std::string::npos)
      << alerts[0].second;
  EXPECT_NE(read_all(paths(7).rank_log(1)).find("attempt 1"), std::string::npos);
}

// Rank 1 is killed; rank 0 fails half a second later because of it (as a peer does on a lost
// connection). Rank 1's log pipe stays open (a child holds it) and srun kills its wrapper when
// rank 0 exits, so rank 0's exit file lands first, or alone: the job still names rank 1, by
// when each entry ended.
TEST_F(PlatformSlurmTest, TheRankThatDiedFirstIsNamedWhenItsPeerIsFasterToReport) {
  Alerts alerts;
  auto job = run_job(R"(job:
  resources: { nodes: 2, npu: 1 }
  entry: 'if [ "$RANK" = 1 ]; then (sleep 4; echo late) & sleep 1; kill -9 $$; fi; sleep 1.5; echo "rank 0: peer lost"; exit 1'
)",
                     9, &alerts);
  EXPECT_EQ(job.state, zp::JobState::Failed);
  EXPECT_EQ(job.reason, "rank 1 on node n2 was killed by signal 9");
  ASSERT_FALSE(alerts.empty());
  EXPECT_NE(alerts.back().second.find("rank 1 on node n2 was killed by signal 9"),
            std::string::npos)
      << alerts.back().second;
}

// Through the server's job manager: a 2 x 2 job submitted to the Slurm backend; every rank's
// metrics, on either node, reach the server through the shared job directory.
TEST_F(PlatformSlurmTest, TheServerIngestsTheMetricsOfEveryNode) {
  zp::JobManagerOptions options;
  options.data_dir = dir_->str() + "/server";
  options.default_backend = "slurm";
  zp::JobManager jobs(options);
  jobs.start();
  try {
    jobs.submit(zp::parse_job_spec("job:\n  resources: { nodes: 4 }\n  entry: 'true'\n", "x"), "");
    ADD_FAILURE() << "a 4-node job was accepted by a 2-node partition";
  } catch (const zp::SubmitError& e) {
    EXPECT_EQ(e.status(), 422);
    EXPECT_STREQ(
        e.what(),
        "[scheduler] rejected: the job asks for 4 nodes but Slurm partition 'debug' has 2");
  }
  auto job = jobs.submit(zp::parse_job_spec(R"(job:
  resources: { nodes: 2, npu: 2 }
  entry: 'echo "{\"name\": \"loss\", \"value\": $RANK, \"step\": 1}" >> "$ZENITH_METRICS_FILE"'
)",
                                            "x"),
                         "");
  ASSERT_TRUE(zt::wait_for([&] { return zp::is_terminal(jobs.get(job.id)->state); }, 60));
  auto done = *jobs.get(job.id);
  ASSERT_EQ(done.state, zp::JobState::Succeeded) << done.reason;
  ASSERT_EQ(done.ranks.size(), 4u);
  EXPECT_EQ(done.ranks[1].host, "n1");
  EXPECT_EQ(done.ranks[2].host, "n2");
  zp::TelemetryStore store(dir_->str() + "/server/metrics.db");
  zp::TelemetryIngest ingest(jobs, store);
  ingest.ingest_files();
  for (int r = 0; r < 4; ++r) {
    auto series = store.series(job.id, "loss", r, 0);
    ASSERT_EQ(series.value.size(), 1u) << "rank " << r;
    EXPECT_DOUBLE_EQ(series.value[0], r);
  }
}

// As a user runs it: `zenith server --backend slurm`, then `zenith submit --follow` of a 2 x 2
// job streams all four ranks' logs from both nodes, `zenith jobs` counts four ranks, and
// `zenith job` and the dashboard show each rank with its node.
TEST_F(PlatformSlurmTest, TheCliAndTheDashboardShowEachRanksNode) {
  zt::ServerProcess server(dir_->str() + "/cli-server", {"--backend", "slurm"});
  const std::string where = " --server " + server.url() + " --token " + server.token();
  const std::string yaml = dir_->str() + "/two-by-two.yaml";
  std::ofstream(yaml) << "job:\n  name: two-by-two\n  resources: { nodes: 2, npu: 2 }\n"
                         "  entry: 'echo \"hello from $RANK on $SLURMD_NODENAME\"'\n";
  auto submitted = zt::run_zenith("submit --follow " + yaml + where);
  ASSERT_EQ(submitted.code, 0) << submitted.output;
  for (int r = 0; r < 4; ++r) {
    // "[rank R] <time> hello from R on nN"
    const std::string said =
        " hello from " + std::to_string(r) + " on n" + std::to_string(r / 2 + 1) + "\n";
    const std::size_t at = submitted.output.find(said);
    ASSERT_NE(at, std::string::npos) << said << submitted.output;
    const std::size_t line = submitted.output.rfind('\n', at) + 1;
    EXPECT_EQ(submitted.output.substr(line, 9), "[rank " + std::to_string(r) + "] ")
        << submitted.output;
  }
  EXPECT_NE(submitted.output.find(" succeeded"), std::string::npos) << submitted.output;
  const std::string id = submitted.output.substr(14, submitted.output.find(' ', 14) - 14);

  auto jobs = zt::run_zenith("jobs" + where);
  ASSERT_EQ(jobs.code, 0) << jobs.output;
  // ID NAME STATE BACKEND DEVICES: the job's ranks, 2 nodes x 2.
  std::istringstream row(jobs.output.substr(jobs.output.find("\n" + id + " ") + 1));
  std::string id_col, name, state, backend;
  int ranks = 0;
  row >> id_col >> name >> state >> backend >> ranks;
  EXPECT_EQ(name + " " + state + " " + backend, "two-by-two succeeded slurm") << jobs.output;
  EXPECT_EQ(ranks, 4) << jobs.output;

  auto one = zt::run_zenith("job " + id + where);
  ASSERT_EQ(one.code, 0) << one.output;
  EXPECT_NE(one.output.find("2 x cpu on each of 2 nodes"), std::string::npos) << one.output;
  for (int r = 0; r < 4; ++r) {
    char line[64];
    std::snprintf(line, sizeof(line), "rank %-3d node %-10s device %-3d", r,
                  ("n" + std::to_string(r / 2 + 1)).c_str(), r % 2);
    EXPECT_NE(one.output.find(line), std::string::npos) << line << "\n" << one.output;
  }

  // The dashboard's API: four ranks requested, each rank's node, rank 3's log from n2.
  auto c = server.client();
  auto listed = nlohmann::json::parse(c.get("/api/v1/dashboard/jobs").body);
  ASSERT_EQ(listed.size(), 1u) << listed.dump();
  EXPECT_EQ(listed[0]["devices_requested"], 4);
  auto page = nlohmann::json::parse(c.get("/api/v1/dashboard/jobs/" + id).body);
  EXPECT_EQ(page["spec"]["nodes"], 2);
  ASSERT_EQ(page["ranks"].size(), 4u) << page.dump();
  for (int r = 0; r < 4; ++r) EXPECT_EQ(page["ranks"][r]["host"], "n" + std::to_string(r / 2 + 1));
  auto log = nlohmann::json::parse(c.get("/api/v1/dashboard/jobs/" + id + "/logs?rank=3").body);
  EXPECT_NE(log["text"].get<std::string>().find("hello from 3 on n2"), std::string::npos)
      << log.dump();
}
