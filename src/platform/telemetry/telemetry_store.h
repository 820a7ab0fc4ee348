// Time series for the dashboard, in the platform's SQLite file (own tables, own connection):
// the scalars each rank logs (metrics.jsonl lines) and the per-rank device samples the server
// takes (CPU utilisation and resident memory; GPU utilisation and memory through NVML).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "platform/db/sqlite_db.h"

namespace zenith::platform {

// One metrics.jsonl line: {"step", "epoch", "name", "value", "time"}.
struct MetricPoint {
  std::string name;
  std::int64_t step = 0;
  std::int64_t epoch = 0;
  double value = 0;
  double time = 0;
  // What happened, for a line that reports an event (a loss spike, a rollback, a loss-scale
  // overflow): the platform raises an alert with it. Not stored with the series.
  std::string event;
};

// One sample of the device a rank runs on. gpu_* are negative when not measured.
struct UsagePoint {
  int rank = 0;
  int device = 0;
  double time = 0;
  double cpu_utilization = 0;     // 0..1 of the device's cores
  std::int64_t memory_bytes = 0;  // resident memory of the rank's processes
  double gpu_utilization = -1;    // 0..1
  std::int64_t gpu_memory_bytes = -1;
};

// A series as columns, after downsampling; `total` counts the points before it.
struct MetricSeries {
  std::string name;
  int rank = 0;
  std::size_t total = 0;
  std::vector<double> step, epoch, value, time;
};

struct UsageSeries {
  int rank = 0;
  int device = 0;
  std::size_t total = 0;
  std::vector<double> time, cpu_utilization, memory_bytes, gpu_utilization, gpu_memory_bytes;
};

class TelemetryStore {
 public:
  // Opens (creating the tables in) the SQLite file at `path`; safe beside JobStore's connection.
  explicit TelemetryStore(const std::string& path);
  ~TelemetryStore();
  TelemetryStore(const TelemetryStore&) = delete;
  TelemetryStore& operator=(const TelemetryStore&) = delete;

  // Appends a rank's points and records how far into its file they were read, atomically.
  void add_points(std::int64_t job_id, int rank, const std::vector<MetricPoint>& points,
                  std::int64_t file_offset);
  // Bytes of the rank's metrics file already ingested (0 when none).
  std::int64_t file_offset(std::int64_t job_id, int rank);
  void add_usage(std::int64_t job_id, const std::vector<UsagePoint>& points);

  // (name, rank) of every series the job has.
  std::vector<std::pair<std::string, int>> series_names(std::int64_t job_id);
  // One series in step order, downsampled to at most `max_points` (0: all).
  MetricSeries series(std::int64_t job_id, const std::string& name, int rank,
                      std::size_t max_points);
  // Per rank, in time order, downsampled (by CPU utilisation's shape) to at most `max_points`.
  std::vector<UsageSeries> usage(std::int64_t job_id, std::size_t max_points);
  // Points stored per (name, rank) of the job.
  std::map<std::pair<std::string, int>, std::int64_t> series_counts(std::int64_t job_id);
  // Drops every point, sample and file offset of the job (retention).
  void prune_job(std::int64_t job_id);
  // The newest value of `name` over all ranks (rank 0 first).
  std::optional<double> last_value(std::int64_t job_id, const std::string& name);

 private:
  void exec(const char* sql);
  SqliteDb db_;
  std::string path_;
  std::mutex mutex_;
};

}  // namespace zenith::platform
