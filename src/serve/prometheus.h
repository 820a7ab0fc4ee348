// The inference server's Prometheus exposition (GET /metrics): requests by endpoint and status,
// request latency, queue time and batch sizes (histograms), queue depth.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace zenith::serve {

// Cumulative buckets as Prometheus wants them: bucket i counts observations <= bounds[i].
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  // name_bucket{le=...}, name_sum, name_count lines; `labels` like `model="x"`.
  void write(std::string& out, const std::string& name, const std::string& labels) const;
  double sum() const { return sum_; }
  std::uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<std::uint64_t> counts_;  // per bucket, not cumulative; the last is +Inf
  double sum_ = 0;
  std::uint64_t count_ = 0;
};

class PrometheusStats {
 public:
  PrometheusStats();
  void request(const std::string& endpoint, int status, double seconds);
  void queue_time(double seconds);
  void batch(int samples);
  // The exposition text; `queue_depth` is sampled by the caller.
  std::string text(const std::string& model, int queue_depth) const;
  std::uint64_t requests_total() const;
  double mean_batch_size() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, std::uint64_t> requests_;
  Histogram latency_, queue_, batch_;
};

}  // namespace zenith::serve
