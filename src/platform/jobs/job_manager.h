// JobManager runs the jobs behind `zenith server`: it owns the job store, device inventory,
// scheduler, controllers and alerts, with one background loop that owns every running job. API
// calls read the store and queue requests for the loop, so a slow stop never blocks a reader.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "platform/exec/executor.h"
#include "platform/jobs/backoff.h"
#include "platform/jobs/device_inventory.h"
#include "platform/jobs/job.h"

namespace zenith::platform {

class JobStore;
class JobController;
class WebhookSender;

struct JobManagerOptions {
  std::string data_dir;
  InventoryOptions inventory;
  std::string default_backend = "local";
  double hang_timeout_s = 600;
  double grace_s = 3;
  double tick_s = 0.2;
  double starvation_s = 600;
  std::string webhook_url;
  std::string slurm_partition;
  // Finished jobs keep their logs, metric and device series and alerts this long, and only the
  // newest `retention_jobs` of them; the job records stay.
  double retention_s = 30 * 86400.0;
  int retention_jobs = 1000;
  RestartPolicy restart;  // failed jobs (max_restarts) and managed services
};

// Submit refused: `status` is the HTTP status to answer with (400 malformed, 422 never fits).
class SubmitError : public std::runtime_error {
 public:
  SubmitError(int status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

struct DeviceStatus {
  Device device;
  std::int64_t job_id = 0;  // 0 = free
  int rank = -1;
  double utilization = 0;         // CPU time of the rank's processes / the device's cores, 0..1
  std::int64_t memory_bytes = 0;  // resident memory of the rank's processes
};

class JobManager {
 public:
  explicit JobManager(JobManagerOptions options);
  ~JobManager();  // stops the loop; running jobs keep running for the next server
  JobManager(const JobManager&) = delete;
  JobManager& operator=(const JobManager&) = delete;

  // Recovers every job from the store and starts the loop.
  void start();

  JobRecord submit(JobSpec spec, const std::string& yaml);
  std::optional<JobRecord> get(std::int64_t id);
  std::vector<JobRecord> list(std::optional<JobState> state = std::nullopt);
  // Stops the job (waiting up to `wait_s` for it); nullopt for an unknown id.
  std::optional<JobRecord> cancel(std::int64_t id, double wait_s = 15);
  std::vector<Alert> alerts(std::int64_t job_id = 0);
  std::vector<DeviceStatus> devices();
  std::string metrics_text();
  JobPaths paths(std::int64_t id) const;
  const JobManagerOptions& options() const { return options_; }
  const std::vector<Device>& inventory() const { return inventory_; }
  // Called (on the loop thread) for each finished job whose data retention removes, to drop
  // what other stores keep of it (the dashboard's series). Add before start().
  void add_prune_hook(std::function<void(std::int64_t job_id)> hook);
  // Jobs pending or running, or finished at or after `since` (unix seconds).
  std::vector<JobRecord> active_since(double since);
  // Records an alert for `job` (the store, the webhook, the server's log); any thread.
  void alert(const JobRecord& job, const std::string& kind, const std::string& message) {
    record_alert(job, kind, message);
  }
  // The newest `limit` alerts, newest first.
  std::vector<Alert> recent_alerts(int limit);
  // Removes what retention says is old now; the loop calls it every few minutes.
  void prune();

 private:
  void loop();
  void tick();
  void schedule_pending();
  void sample_devices();
  void record_alert(const JobRecord& job, const std::string& kind, const std::string& message);
  std::unique_ptr<JobController> make_controller(const JobRecord& job);

  JobManagerOptions options_;
  std::vector<Device> inventory_;
  std::unique_ptr<JobStore> store_;
  std::unique_ptr<WebhookSender> webhook_;
  std::vector<std::function<void(std::int64_t)>> prune_hooks_;

  // Owned by the loop thread.
  std::map<std::int64_t, std::unique_ptr<JobController>> running_;
  std::map<std::pair<std::int64_t, int>, std::pair<long long, double>> cpu_samples_;  // ticks, time

  std::mutex mutex_;  // guards the fields below
  std::condition_variable wake_;
  std::condition_variable done_;
  std::set<std::int64_t> cancel_requests_;
  std::map<int, std::pair<std::int64_t, int>> holders_;   // device index → (job, rank)
  std::map<int, std::pair<double, std::int64_t>> usage_;  // device index → (util, memory)
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace zenith::platform
