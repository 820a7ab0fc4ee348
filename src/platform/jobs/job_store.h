// The platform's state in SQLite (WAL mode): jobs with their ranks, and alerts. Each write is
// one transaction, so a crash never leaves half a job behind.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "platform/db/sqlite_db.h"
#include "platform/jobs/job.h"

namespace zenith::platform {

class JobStore {
 public:
  explicit JobStore(const std::string& path);
  ~JobStore();
  JobStore(const JobStore&) = delete;
  JobStore& operator=(const JobStore&) = delete;

  // Assigns job.id.
  void insert_job(JobRecord& job);
  void update_job(const JobRecord& job);
  std::optional<JobRecord> get_job(std::int64_t id);
  // Oldest first; all states when `state` is empty.
  std::vector<JobRecord> list_jobs(std::optional<JobState> state = std::nullopt);

  // Assigns alert.id.
  void add_alert(Alert& alert);
  // Newest last; all jobs when job_id is 0.
  std::vector<Alert> list_alerts(std::int64_t job_id = 0);

 private:
  void exec(const char* sql);
  SqliteDb db_;
  std::string path_;
  std::mutex mutex_;
};

}  // namespace zenith::platform
