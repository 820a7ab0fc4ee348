// What the kernel lets zenith isolate a job with, and the job's memory cgroup.
// Detected at run time: PID and mount namespaces, cgroup v2 or v1 memory controller;
// RLIMIT_AS is the fallback when no cgroup can be made.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace zenith::platform {

struct IsolationSupport {
  bool pid_namespace = false;
  bool mount_namespace = false;
  std::string cgroup;  // "v2", "v1" or "none"
  std::string describe() const;
};

// Probed once per process by trying each feature in a throwaway child.
const IsolationSupport& isolation_support();

// One memory cgroup per job, under this process's own cgroup, with one child per rank: the job's
// `memory` is a limit per rank. Removed on destruction.
class JobCgroup {
 public:
  // nullptr when this host has no writable memory cgroup; `name` is like "zenith-job-42".
  static std::unique_ptr<JobCgroup> create(const std::string& name, std::int64_t memory_limit);
  // Re-opens one made by an earlier server (after a restart); nullptr when gone.
  static std::unique_ptr<JobCgroup> open(const std::string& path);
  ~JobCgroup();
  JobCgroup(const JobCgroup&) = delete;
  JobCgroup& operator=(const JobCgroup&) = delete;

  const std::string& path() const { return path_; }
  // The file a process writes "0" to in order to join.
  std::string procs_file() const { return path_ + "/cgroup.procs"; }
  // A child cgroup for rank `rank` with its own limit (0 = none): its cgroup.procs, or the
  // job's own where the child cannot be made (the job's limit then holds for all ranks).
  std::string rank_procs_file(int rank, std::int64_t memory_limit);
  int oom_kills() const;
  std::int64_t memory_usage() const;
  std::vector<pid_t> pids() const;
  void kill_all();
  // Keep the directory (a restarted server will re-open it).
  void release() { keep_ = true; }

  // Use create() or open(); this only wraps an existing directory.
  JobCgroup(std::string path, bool v2) : path_(std::move(path)), v2_(v2) {}

 private:
  std::string path_;
  bool v2_ = false;
  bool keep_ = false;
};

}  // namespace zenith::platform
