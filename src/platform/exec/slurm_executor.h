// The Slurm backend: a job becomes one sbatch allocation (ntasks = ranks) with one srun step;
// a generated wrapper maps SLURM_PROCID/SLURM_LOCALID/SLURM_NTASKS/SLURM_JOB_NODELIST to the
// same rank environment and log files as the local executor.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "platform/exec/executor.h"

namespace zenith::platform {

std::unique_ptr<JobRun> start_slurm_run(JobRecord& job, const JobPaths& paths,
                                        const std::string& partition);
std::unique_ptr<JobRun> attach_slurm_run(JobRecord& job, const JobPaths& paths);

// True when sbatch, squeue and scancel are on PATH.
bool slurm_available();

// Runs a command line through /bin/sh, returning its stdout and exit status.
struct CommandResult {
  int status = -1;
  std::string output;
};
CommandResult run_command(const std::string& command_line);

// Quotes a string for /bin/sh.
std::string shell_quote(const std::string& s);

}  // namespace zenith::platform
