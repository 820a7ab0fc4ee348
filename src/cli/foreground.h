// Runs a job spec in the foreground, without a server: `zenith run job.yaml` and
// `zenith train --nproc N` share it.
#pragma once

#include <string>

#include "platform/jobs/job_spec.h"

namespace zenith::cli {

struct ForegroundOptions {
  std::string data_dir;       // logs go to <data_dir>/runs/<id>
  int cpu_devices = 8;        // logical CPU devices on a host without GPUs
  double hang_timeout_s = 0;  // 0: no hang alerts
  std::string backend;        // "local" or "slurm"; empty: the spec's, else local
  std::string slurm_partition;
};

// Starts the job's ranks, prints their logs with a "[rank N]" prefix and alerts on stderr until
// it ends; SIGINT/SIGTERM cancel it. Returns 0 on success, 130 when cancelled, else the failed
// rank's exit code (1 when unknown).
int run_spec_foreground(const platform::JobSpec& spec, const ForegroundOptions& options);

}  // namespace zenith::cli
