#include "serve/prometheus.h"

#include <cstdio>

namespace zenith::serve {

namespace {

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::write(std::string& out, const std::string& name, const std::string& labels) const {
  std::uint64_t cumulative = 0;
  const std::string sep = labels.empty() ? "" : ",";
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    const std::string le = i < bounds_.size() ? number(bounds_[i]) : "+Inf";
    out += name + "_bucket{" + labels + sep + "le=\"" + le + "\"} " + std::to_string(cumulative) +
           "\n";
  }
  const std::string braces = labels.empty() ? "" : "{" + labels + "}";
  out += name + "_sum" + braces + " " + number(sum_) + "\n";
  out += name + "_count" + braces + " " + std::to_string(count_) + "\n";
}

PrometheusStats::PrometheusStats()
    : latency_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}),
      queue_({0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}),
      batch_({1, 2, 4, 8, 16, 32, 64, 128, 256}) {}

void PrometheusStats::request(const std::string& endpoint, int status, double seconds) {
  std::lock_guard lock(mutex_);
  ++requests_[{endpoint, status}];
  latency_.observe(seconds);
}

void PrometheusStats::queue_time(double seconds) {
  std::lock_guard lock(mutex_);
  queue_.observe(seconds);
}

void PrometheusStats::batch(int samples) {
  std::lock_guard lock(mutex_);
  batch_.observe(samples);
}

std::uint64_t PrometheusStats::requests_total() const {
  std::lock_guard lock(mutex_);
  std::uint64_t n = 0;
  for (const auto& [key, count] : requests_) n += count;
  return n;
}

double PrometheusStats::mean_batch_size() const {
  std::lock_guard lock(mutex_);
  return batch_.count() ? batch_.sum() / double(batch_.count()) : 0.0;
}

std::string PrometheusStats::text(const std::string& model, int queue_depth) const {
  std::lock_guard lock(mutex_);
  const std::string m = "model=\"" + model + "\"";
  std::string out;
  out += "# HELP zenith_serve_requests_total Requests answered, by endpoint and HTTP status.\n";
  out += "# TYPE zenith_serve_requests_total counter\n";
  for (const auto& [key, count] : requests_)
    out += "zenith_serve_requests_total{" + m + ",endpoint=\"" + key.first + "\",status=\"" +
           std::to_string(key.second) + "\"} " + std::to_string(count) + "\n";
  out += "# HELP zenith_serve_request_seconds Time from request to response.\n";
  out += "# TYPE zenith_serve_request_seconds histogram\n";
  latency_.write(out, "zenith_serve_request_seconds", m);
  out += "# HELP zenith_serve_queue_seconds Time a request waited for its batch to start.\n";
  out += "# TYPE zenith_serve_queue_seconds histogram\n";
  queue_.write(out, "zenith_serve_queue_seconds", m);
  out += "# HELP zenith_serve_batch_size Samples per model run.\n";
  out += "# TYPE zenith_serve_batch_size histogram\n";
  batch_.write(out, "zenith_serve_batch_size", m);
  out += "# HELP zenith_serve_queue_depth Requests waiting for a batch.\n";
  out += "# TYPE zenith_serve_queue_depth gauge\n";
  out += "zenith_serve_queue_depth{" + m + "} " + std::to_string(queue_depth) + "\n";
  return out;
}

}  // namespace zenith::serve
