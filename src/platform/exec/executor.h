// Executors run one attempt of a job: every rank started together, watched, and stopped
// together. The local executor forks rank shims on this host; the Slurm one goes through sbatch.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "platform/jobs/device_inventory.h"
#include "platform/jobs/job.h"

namespace zenith::platform {

// Where a job's files live: DATA/jobs/<id>/{logs/rank_N.log, rank_table.json, work/}.
struct JobPaths {
  std::string job_dir;
  // The server's data dir, which holds job_dir (DATA/jobs/<id>): hidden from the ranks, but for
  // their own job dir, where a mount namespace allows. Empty: nothing hidden.
  std::string data_dir;
  std::string logs_dir() const { return job_dir + "/logs"; }
  std::string rank_log(int rank) const {
    return logs_dir() + "/rank_" + std::to_string(rank) + ".log";
  }
  std::string rank_exit(int rank) const {
    return logs_dir() + "/rank_" + std::to_string(rank) + ".exit";
  }
  // Written by the Slurm wrapper as soon as the entry ends, in rank_exit's format; replaced by
  // rank_exit once the rank's log is complete.
  std::string rank_ended(int rank) const {
    return logs_dir() + "/rank_" + std::to_string(rank) + ".ended";
  }
  std::string rank_table() const { return job_dir + "/rank_table.json"; }
  std::string work_dir() const { return job_dir + "/work"; }
  std::string heartbeat() const { return job_dir + "/heartbeat"; }
  // `zenith train --profile` writes trace.json and summary.json here as well as into its output
  // dir (it finds the job dir through ZENITH_JOB_DIR); the dashboard serves them.
  std::string profile_dir() const { return job_dir + "/profile"; }
};

struct RunOutcome {
  enum Status { Running, Succeeded, Failed } status = Running;
  int rank = -1;      // the first rank that failed
  int exit_code = 0;  // its exit code, or signal number when `signaled`
  bool signaled = false;
  bool oom = false;
  bool lost = false;   // the rank ended unseen, with no exit status
  std::string reason;  // for the job record and alerts
};

class JobRun {
 public:
  virtual ~JobRun() = default;
  // Updates job.ranks and says whether the attempt is still running.
  virtual RunOutcome poll(JobRecord& job) = 0;
  // Stops every rank (SIGTERM, then SIGKILL after `grace_s`) and waits until none is left.
  virtual void stop(JobRecord& job, double grace_s) = 0;
  // The server is going away but the job goes on: keep processes, cgroups and files.
  virtual void detach() = 0;
  // Memory the attempt uses now, in bytes (0 when unknown).
  virtual std::int64_t memory_usage() const { return 0; }
  // Processes of the attempt the kernel's OOM killer has killed so far.
  virtual int oom_kills() const { return 0; }
};

// Launches job.ranks.size() ranks on `devices` (one per rank). Sets job.ranks, job.cgroup and
// job.master_port. Throws on failure to start. A rank's environment is the spec's env, the
// platform's variables (rank_env, thread_env) and PATH, HOME and LANG; with `inherit_env` (a
// foreground `zenith run`, whose environment is the user's shell) everything of this process's.
std::unique_ptr<JobRun> start_local_run(JobRecord& job, const JobPaths& paths,
                                        const std::vector<Device>& devices,
                                        bool inherit_env = false);

// Re-attaches to ranks a previous server started (from job.ranks and job.cgroup).
std::unique_ptr<JobRun> attach_local_run(JobRecord& job, const JobPaths& paths);

}  // namespace zenith::platform
