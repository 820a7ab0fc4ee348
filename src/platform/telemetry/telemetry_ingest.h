// Feeds the dashboard's time series: a background thread that, every second, reads what each
// job's ranks appended to their metrics files and, every two seconds, records the utilisation
// and memory of every device a running job holds (CPU from /proc through JobManager, GPU through
// NVML where present). Also renders these as Prometheus text for /metrics.
//
// Where the metrics come from: the platform gives every rank
//   ZENITH_METRICS_FILE=DATA/jobs/<id>/logs/rank_<rank>.metrics.jsonl (beside its log; the logs
//   dir exists from submission on, so a plain `echo ... >> "$ZENITH_METRICS_FILE"` works)
// and `zenith train` appends its metrics.jsonl lines ({"step", "epoch", "name", "value",
// "time"}) there as well as to OUT/metrics.jsonl. Any program may write the same lines. A line
// with an "event" string (zenith finetune's loss spikes, rollbacks and loss-scale overflows)
// also raises a "training_event" alert naming the job, rank, step and event.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "platform/jobs/job.h"
#include "platform/telemetry/nvml.h"
#include "platform/telemetry/telemetry_store.h"

namespace zenith::platform {

class JobManager;

// DIR/logs/rank_<rank>.metrics.jsonl for the job dir DIR.
std::string rank_metrics_file(const std::string& job_dir, int rank);

// What one job may put into the store: a rank writes whatever it likes to its metrics file.
struct TelemetryLimits {
  std::size_t max_line_bytes = 64 * 1024;       // longer lines are skipped
  std::size_t max_name_bytes = 200;             // longer names are skipped
  std::size_t max_series = 1000;                // (name, rank) pairs per job
  std::int64_t max_points_per_series = 500000;  // later points are dropped
};

// Parses complete metrics.jsonl lines; malformed lines, lines without a numeric "value" and
// lines or names over the limits are skipped.
std::vector<MetricPoint> parse_metric_lines(const std::string& text,
                                            const TelemetryLimits& limits = {});

// Points stored so far per (name, rank) of one job.
using SeriesCounts = std::map<std::pair<std::string, int>, std::int64_t>;

// Keeps the points of `rank` that fit the job's series and per-series limits, counting them
// into `counts`; returns how many were dropped.
std::size_t admit_points(std::vector<MetricPoint>& points, int rank, SeriesCounts& counts,
                         const TelemetryLimits& limits);

class TelemetryIngest {
 public:
  TelemetryIngest(JobManager& jobs, TelemetryStore& store);
  ~TelemetryIngest();  // stops the thread
  TelemetryIngest(const TelemetryIngest&) = delete;
  TelemetryIngest& operator=(const TelemetryIngest&) = delete;

  void start();
  // One pass over every job's files (the thread does this every second); public for tests.
  void ingest_files();
  void sample_usage();
  std::string metrics_text();
  // Newest NVML sample per GPU (empty without NVML).
  std::map<int, GpuSample> gpus();

 private:
  void loop();
  // An alert for each line of `points` that reports an event (MetricPoint::event), with the job,
  // rank, step and what happened; at most kMaxEventAlerts per job.
  void raise_event_alerts(const JobRecord& job, int rank, const std::vector<MetricPoint>& points);

  JobManager& jobs_;
  TelemetryStore& store_;
  std::unique_ptr<Nvml> nvml_;
  std::set<std::int64_t> unfinished_;            // ended jobs whose files still have unread lines
  std::map<std::int64_t, SeriesCounts> counts_;  // per job being ingested
  std::map<std::int64_t, int> event_alerts_;     // alerts raised per job being ingested
  std::set<std::int64_t> warned_;                // jobs told they went over the limits
  TelemetryLimits limits_;
  double last_pass_ = 0;
  std::set<std::pair<std::int64_t, int>> sampled_;  // (job, rank) seen by sample_usage

  std::mutex mutex_;  // guards the fields below
  std::condition_variable wake_;
  bool stop_ = false;
  // Newest value per (job, rank, name), for /metrics.
  std::map<std::tuple<std::int64_t, int, std::string>, double> last_;
  std::vector<std::pair<std::int64_t, UsagePoint>> last_usage_;
  std::map<int, GpuSample> gpus_;  // NVML index → newest sample
  std::thread thread_;
};

}  // namespace zenith::platform
