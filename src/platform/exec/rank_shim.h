// One rank's process: a small supervisor ("shim") that owns the rank's session, namespaces and
// log file, and runs the entry through /bin/sh -c. The shim stamps each output line with the
// time and writes the exit status to a file, so ranks outlive a server restart and a new
// server can still learn how they ended.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace zenith::platform {

struct RankLaunch {
  int rank = 0;
  std::string device_name;  // for the "Rank N started" line
  std::vector<int> cores;   // CPU affinity; empty = inherit
  std::string working_dir;
  // What ps shows for the shim, as space-separated words ("zenith rank <job> <rank>"): without
  // it the shim, a fork of the server, would show the server's command line. Cut to the
  // length of that command line.
  std::string title;
  std::string command;                     // run as /bin/sh -c command
  std::map<std::string, std::string> env;  // the complete environment
  std::string log_path;                    // appended, one timestamped line per output line
  // Written when the entry ends, once its log is complete: "exited N T" or "signaled N T",
  // T its end in seconds since the epoch.
  std::string exit_path;
  std::string ended_path;      // the same, written at once when the entry ends; removed with exit
  std::int64_t rlimit_as = 0;  // 0 = none
  std::string cgroup_procs;    // cgroup.procs to join before running anything; "" = none
  bool pid_namespace = false;
  bool mount_namespace = false;
  // With a mount namespace: a private tmpfs over `hide_dir` (the server's DATA: token, keys,
  // database, other jobs), with `keep_dir` (the job's own dir, inside it) bound back; the
  // directories from hide_dir down to keep_dir are made in the tmpfs first.
  std::string hide_dir, keep_dir;
  std::vector<std::string> keep_parents;
  // Mount points remounted read-only for the rank (cgroup filesystems: it must not raise its
  // own limits); the entry also loses CAP_SYS_ADMIN, so it cannot remount them.
  std::vector<std::string> readonly_mounts;
};

struct RankProcess {
  pid_t pid = 0;             // the shim: leader of the rank's session
  long long start_time = 0;  // /proc/<pid>/stat starttime, guards against pid reuse
  bool pid_namespace = false;
};

// How an entry ended, read back from the exit file.
struct RankExit {
  bool signaled = false;
  int code = 0;         // exit code, or the signal number
  double ended_at = 0;  // when the entry ended, seconds since the epoch; 0 where not written
};

// Starts the rank's shim (which starts the entry) and writes the "Rank N started" log line.
RankProcess launch_rank(const RankLaunch& launch);

// nullopt while the entry runs (or when the shim died before writing the file).
std::optional<RankExit> read_rank_exit(const std::string& exit_path);

// "2024-05-01T12:00:00.123Z", UTC.
std::string utc_timestamp();

// Appends one timestamped line to a log (O_APPEND keeps concurrent writers' lines whole).
void append_log_line(const std::string& path, const std::string& line);

}  // namespace zenith::platform
