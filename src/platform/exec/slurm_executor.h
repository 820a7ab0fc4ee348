// The Slurm backend: a job of `nodes` x `npu` ranks becomes one sbatch allocation
// (-N nodes, --ntasks-per-node npu) with one srun step (slurm_scripts.h). Logs, exit files,
// metrics and the rank table go to the job directory, which every node sees (Slurm sites share
// a filesystem); the server reads them there as it does for local jobs.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "platform/exec/executor.h"
#include "platform/exec/slurm_scripts.h"
#include "platform/jobs/scheduler.h"

namespace zenith::platform {

// Submits the job; throws when Slurm refuses it or `partition` cannot hold it.
std::unique_ptr<JobRun> start_slurm_run(JobRecord& job, const JobPaths& paths,
                                        const std::string& partition);
std::unique_ptr<JobRun> attach_slurm_run(JobRecord& job, const JobPaths& paths);

// True when sbatch, squeue and scancel are on PATH.
bool slurm_available();

// The nodes of `partition` (the default partition when empty) from sinfo; nullopt when sinfo
// cannot tell (no cluster, unknown partition).
std::optional<PartitionNodes> slurm_partition_nodes(const std::string& partition);

// Why the job can never run in `partition` ("" = the default one), or nullopt when it fits or
// Slurm cannot be asked.
std::optional<std::string> slurm_never_fits(const JobRecord& job, const std::string& partition);

// Runs a command line through /bin/sh, returning its stdout and exit status.
struct CommandResult {
  int status = -1;
  std::string output;
};
CommandResult run_command(const std::string& command_line);

}  // namespace zenith::platform
