// A job as the platform tracks it: its spec, state, devices and ranks.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "platform/jobs/job_spec.h"

namespace zenith::platform {

enum class JobState { Pending, Running, Succeeded, Failed, Cancelled, Lost };

const char* to_string(JobState state);
std::optional<JobState> job_state_from_string(const std::string& text);
bool is_terminal(JobState state);

struct RankRecord {
  int rank = 0;
  int device = 0;  // DEVICE_ID
  std::string host = "127.0.0.1";
  pid_t pid = 0;                  // the rank's shim (local backend)
  long long start_time = 0;       // guards against pid reuse when re-attaching
  std::string state = "pending";  // pending, running, exited, signaled, lost
  int exit_code = 0;              // exit code, or signal number when signaled
};

struct Alert {
  std::int64_t id = 0;
  std::int64_t job_id = 0;
  std::string kind;  // oom, abnormal_exit, hang, over_quota, lost, training_event
  std::string message;
  double created_at = 0;
};

struct JobRecord {
  std::int64_t id = 0;
  JobSpec spec;
  std::string yaml;  // as submitted, for the record
  JobState state = JobState::Pending;
  std::string backend = "local";
  std::vector<int> devices;  // device indices held while running
  std::string device_kind = "cpu";
  int restart_count = 0;
  std::optional<int> exit_code;
  std::string reason;  // why it failed / was cancelled / was lost
  double submitted_at = 0, started_at = 0, finished_at = 0;
  std::string external_id;  // Slurm job id
  std::string cgroup;       // the job's cgroup path, re-opened after a restart
  int master_port = 0;
  std::vector<RankRecord> ranks;
};

nlohmann::json job_to_json(const JobRecord& job);
nlohmann::json alert_to_json(const Alert& alert);

double now_seconds();

}  // namespace zenith::platform
