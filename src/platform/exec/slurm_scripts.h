// The two scripts of a Slurm job. The batch script runs on the allocation's first node: it
// writes the allocation's nodes (name and address, in rank order) and the MindSpore rank table
// into the job directory, which every node sees, and starts one srun step of
// nodes x devices tasks, laid out block-wise. The rank wrapper is one task = one rank: the
// rank environment of the local executor (rank_env) with the per-rank values Slurm gives each
// task, then the entry, its output stamped into the rank's log and its exit status into the
// rank's exit file.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/shell_quote.h"  // shell_quote, for the scripts and sbatch
#include "platform/exec/executor.h"
#include "platform/jobs/job.h"

namespace zenith::platform {

// MASTER_PORT of a Slurm job, from its job id, so that the nodes agree without talking: the
// range lies below Linux's ephemeral ports (32768-60999).
constexpr int kSlurmMasterPortBase = 20000;
constexpr int kSlurmMasterPortSpan = 10000;
inline int slurm_master_port(long long slurm_job_id) {
  return kSlurmMasterPortBase + static_cast<int>(slurm_job_id % kSlurmMasterPortSpan);
}

// DATA/jobs/<id>/slurm_nodes: one "name address" line per node of the running allocation.
inline std::string slurm_nodes_file(const JobPaths& paths) {
  return paths.job_dir + "/slurm_nodes";
}
inline std::string slurm_wrapper_file(const JobPaths& paths) {
  return paths.job_dir + "/slurm_rank.sh";
}

struct SlurmNode {
  std::string name;
  std::string address;  // NodeAddr: what other nodes connect to (the name need not resolve)
};
// The allocation's nodes in rank order; nullopt until the batch script has written them.
std::optional<std::vector<SlurmNode>> read_slurm_nodes(const JobPaths& paths);

// sbatch's script: nodes (-N) x devices (--ntasks-per-node) ranks, in `partition` when given.
std::string slurm_batch_script(const JobRecord& job, const JobPaths& paths,
                               const std::string& partition);
// The task wrapper srun runs once per rank.
std::string slurm_rank_wrapper(const JobRecord& job, const JobPaths& paths);

}  // namespace zenith::platform
