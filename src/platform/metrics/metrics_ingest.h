// Feeds the dashboard's time series: a background thread that, every second, reads what each
// job's ranks appended to their metrics files and, every two seconds, records the utilisation
// and memory of every device a running job holds (CPU from /proc through JobManager, GPU through
// NVML where present). Also renders these as Prometheus text for /metrics.
//
// Where the metrics come from: the platform gives every rank
//   ZENITH_METRICS_FILE=DATA/jobs/<id>/logs/rank_<rank>.metrics.jsonl (beside its log; the logs
//   dir exists from submission on, so a plain `echo ... >> "$ZENITH_METRICS_FILE"` works)
// and `zenith train` appends its metrics.jsonl lines ({"step", "epoch", "name", "value",
// "time"}) there as well as to OUT/metrics.jsonl. Any program may write the same lines.
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

#include "platform/metrics/metrics_store.h"
#include "platform/metrics/nvml.h"

namespace zenith::platform {

class JobManager;

// DIR/logs/rank_<rank>.metrics.jsonl for the job dir DIR.
std::string rank_metrics_file(const std::string& job_dir, int rank);

// Parses complete metrics.jsonl lines; malformed lines and lines without a numeric "value"
// are skipped.
std::vector<MetricPoint> parse_metric_lines(const std::string& text);

class MetricsIngest {
 public:
  MetricsIngest(JobManager& jobs, MetricsStore& store);
  ~MetricsIngest();  // stops the thread
  MetricsIngest(const MetricsIngest&) = delete;
  MetricsIngest& operator=(const MetricsIngest&) = delete;

  void start();
  // One pass over every job's files (the thread does this every second); public for tests.
  void ingest_files();
  void sample_usage();
  std::string metrics_text();
  // Newest NVML sample per GPU (empty without NVML).
  std::map<int, GpuSample> gpus();

 private:
  void loop();

  JobManager& jobs_;
  MetricsStore& store_;
  std::unique_ptr<Nvml> nvml_;
  std::set<std::int64_t> finished_;                 // ended jobs whose files are read to the end
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
