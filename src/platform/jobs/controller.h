// Drives one job through its life on an executor: start, watch, restart on failure
// (max_restarts), stop on timeout or over quota, raise alerts. Used by the server for every
// job and by `zenith run` for its one job.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "platform/exec/executor.h"
#include "platform/jobs/backoff.h"
#include "platform/jobs/device_inventory.h"
#include "platform/jobs/job.h"

namespace zenith::platform {

struct ControllerOptions {
  double hang_timeout_s = 0;    // default when the spec gives none; 0 = no hang alerts
  double grace_s = 3;           // SIGTERM → SIGKILL
  double quota_interval_s = 2;  // how often the job dir's size is measured
  std::string slurm_partition;  // for the Slurm backend
  bool inherit_env = false;     // ranks get this process's whole environment (`zenith run`)
  // A failed attempt restarts after restart.delay_s, doubling each restart up to
  // restart.max_delay_s (a crash loop must not spin).
  RestartPolicy restart;
};

struct ControllerHooks {
  std::function<void(const JobRecord&)> save;  // persist (the store, or nothing)
  std::function<void(const JobRecord&, const std::string& kind, const std::string& message)> alert;
  std::function<void(const JobRecord&, const std::string& line)> info;  // progress lines
};

class JobController {
 public:
  JobController(JobRecord job, JobPaths paths, ControllerOptions options, ControllerHooks hooks);
  ~JobController();

  // Starts the first attempt on `devices` (local) or through sbatch (slurm).
  void start(const std::vector<Device>& devices);
  // Takes over a job a previous server was running.
  void attach();
  // Advances the job; true once it is finished (devices may be released).
  bool tick();
  // Stops the job for good with `reason` (cancel, shutdown of `zenith run`).
  void cancel(const std::string& reason);
  // The server exits but the job goes on.
  void detach();

  const JobRecord& job() const { return job_; }
  std::int64_t memory_usage() const { return run_ ? run_->memory_usage() : 0; }

 private:
  void launch();
  void finish(JobState state, const std::string& reason, std::optional<int> exit_code);
  void check_hang();
  void check_oom_kills();
  bool check_quota();
  void raise(const std::string& kind, const std::string& message);

  JobRecord job_;
  JobPaths paths_;
  ControllerOptions options_;
  ControllerHooks hooks_;
  std::vector<Device> devices_;
  std::unique_ptr<JobRun> run_;
  double attempt_started_ = 0;
  bool hang_alerted_ = false;
  int oom_kills_seen_ = 0;  // OOM kills of this attempt already alerted
  double last_quota_check_ = 0;
  double relaunch_at_ = 0;  // > 0: a restart waits until then (backoff)
};

// Bytes used by every file under `dir` (allocated blocks, not apparent size).
std::int64_t directory_usage(const std::string& dir);

}  // namespace zenith::platform
