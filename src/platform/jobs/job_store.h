// The platform's state in SQLite (WAL mode): jobs with their ranks, and alerts. Each write is
// one transaction, so a crash never leaves half a job behind.
#pragma once

#include <cstdint>
#include <map>
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
  // Pending and running jobs and those finished at or after `since`, oldest first.
  std::vector<JobRecord> active_since(double since);
  // Jobs per state, counted through the state index.
  std::map<std::string, int> count_by_state();
  // Finished jobs whose data retention removes now: finished before `before`, or beyond the
  // newest `keep` finished ones; not yet pruned.
  std::vector<std::int64_t> prune_candidates(double before, int keep);
  // Deletes the job's alerts and marks it pruned.
  void prune_job(std::int64_t id);

  // Assigns alert.id.
  void add_alert(Alert& alert);
  // Newest last; all jobs when job_id is 0.
  std::vector<Alert> list_alerts(std::int64_t job_id = 0);
  // The newest `limit`, newest first.
  std::vector<Alert> recent_alerts(int limit);
  std::map<std::string, int> count_alerts_by_kind();
  // EXPLAIN QUERY PLAN of each query the server's loops run every tick (for the index test).
  std::vector<std::string> hot_query_plans();

 private:
  void exec(const char* sql);
  SqliteDb db_;
  std::string path_;
  std::mutex mutex_;
};

}  // namespace zenith::platform
