// The Slurm job's scripts as text (no cluster needed): the allocation's shape, the same rank
// variables as the local executor's, the user's entry passed through untouched.
#include "platform/exec/slurm_scripts.h"

#include <gtest/gtest.h>

#include "platform/exec/rank_table.h"
#include "platform/jobs/job_spec.h"
#include "support/files.h"
#include "support/temp_dir.h"

namespace zp = zenith::platform;
namespace zt = zenith::testing;

namespace {

zp::JobRecord job_of(const std::string& yaml) {
  zp::JobRecord job;
  job.id = 42;
  job.backend = "slurm";
  job.spec = zp::parse_job_spec(yaml, "job.yaml");
  return job;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST(PlatformSlurmScripts, TheBatchScriptAsksForNodesTimesDevices) {
  const zp::JobPaths paths{"/data/jobs/42"};
  auto job = job_of("job:\n  resources: { nodes: 3, npu: 4 }\n  timeout: 90s\n  entry: x\n");
  const std::string s = zp::slurm_batch_script(job, paths, "batch");
  EXPECT_TRUE(has(s, "#SBATCH --nodes=3\n")) << s;
  EXPECT_TRUE(has(s, "#SBATCH --ntasks-per-node=4\n")) << s;
  EXPECT_TRUE(has(s, "#SBATCH --partition=batch\n")) << s;
  EXPECT_TRUE(has(s, "#SBATCH --time=2\n")) << s;  // minutes, rounded up
  EXPECT_FALSE(has(s, "--gpus-per-node")) << s;
  EXPECT_TRUE(has(s, "d < 4; d++, rank++")) << s;  // the rank table's devices per node
  EXPECT_TRUE(has(s,
                  "srun --kill-on-bad-exit=1 --distribution=block bash "
                  "'/data/jobs/42/slurm_rank.sh'"))
      << s;
  job.device_kind = "cuda";
  EXPECT_TRUE(has(zp::slurm_batch_script(job, paths, ""), "#SBATCH --gpus-per-node=4\n"));
  EXPECT_FALSE(has(zp::slurm_batch_script(job, paths, ""), "--partition"));
}

TEST(PlatformSlurmScripts, EveryRankVariableOfTheLocalExecutorIsExported) {
  const zp::JobPaths paths{"/data/jobs/42"};
  auto job = job_of(
      "job:\n  resources: { nodes: 2, npu: 2 }\n  env: { LR: \"0.1\" }\n"
      "  entry: echo '@ID@ @LOGS@' \"$RANK\"\n");
  const std::string s = zp::slurm_rank_wrapper(job, paths);
  zp::RankEnvContext ctx;
  for (const auto& [key, value] : zp::rank_env(ctx, {}))
    EXPECT_TRUE(has(s, "\nexport " + key + "=")) << key << " missing from\n" << s;
  EXPECT_TRUE(has(s, "export LR='0.1'\n")) << s;
  EXPECT_TRUE(has(s, "export RANK=\"$SLURM_PROCID\"\n")) << s;
  EXPECT_TRUE(has(s, "export LOCAL_RANK=\"$SLURM_LOCALID\"\n")) << s;
  EXPECT_TRUE(has(s, "export NODE_RANK=\"$SLURM_NODEID\"\n")) << s;
  EXPECT_TRUE(has(s, "export WORLD_SIZE='4'\n")) << s;
  EXPECT_TRUE(has(s, "export MASTER_PORT=$((20000 + SLURM_JOB_ID % 10000))\n")) << s;
  EXPECT_TRUE(has(s, "export ZENITH_COMM_ADDR=\"$node_addr\"\n")) << s;
  // The entry reaches the shell as written, its @...@ untouched.
  EXPECT_TRUE(has(s, "/bin/sh -c 'echo '\\''@ID@ @LOGS@'\\'' \"$RANK\"'")) << s;
  EXPECT_EQ(zp::slurm_master_port(123456), 23456);
  EXPECT_FALSE(has(s, "ulimit")) << s;
  // `memory` is per rank: each task's address space, with one malloc arena.
  const std::string limited = zp::slurm_rank_wrapper(
      job_of("job:\n  resources: { nodes: 2, npu: 2, memory: 1Gi }\n  entry: true\n"), paths);
  EXPECT_TRUE(has(limited, "\nulimit -v 1048576\n")) << limited;
  EXPECT_TRUE(has(limited, "export MALLOC_ARENA_MAX='1'\n")) << limited;
}

TEST(PlatformSlurmScripts, TheNodesFileListsNamesAndAddresses) {
  zt::TempDir dir("slurm_nodes");
  const zp::JobPaths paths{dir.str()};
  EXPECT_FALSE(zp::read_slurm_nodes(paths).has_value());
  zt::write_bytes(zp::slurm_nodes_file(paths), "n1 10.0.0.1\nn2 10.0.0.2\n");
  auto nodes = zp::read_slurm_nodes(paths);
  ASSERT_TRUE(nodes.has_value());
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[1].name, "n2");
  EXPECT_EQ((*nodes)[1].address, "10.0.0.2");
}
