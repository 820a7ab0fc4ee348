#include "platform/telemetry/telemetry_ingest.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "platform/jobs/job_manager.h"

namespace zenith::platform {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t kMaxReadBytes = 64 << 20;  // per file and pass; the rest comes next pass
constexpr std::size_t kMaxEventBytes = 1000;     // of an event's text in an alert
constexpr int kMaxEventAlerts = 100;             // per job: a run that spikes all along

// A Prometheus label value: backslash, quote and newline escaped.
std::string label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"')
      out += '\\', out += c;
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

}  // namespace

std::string rank_metrics_file(const std::string& job_dir, int rank) {
  return job_dir + "/logs/rank_" + std::to_string(rank) + ".metrics.jsonl";
}

std::vector<MetricPoint> parse_metric_lines(const std::string& text,
                                            const TelemetryLimits& limits) {
  std::vector<MetricPoint> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::size_t begin = pos;
    pos = end + 1;
    if (end - begin > limits.max_line_bytes) continue;
    auto j = nlohmann::json::parse(text.begin() + begin, text.begin() + end, nullptr, false);
    if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) continue;
    if (j["name"].get_ref<const std::string&>().size() > limits.max_name_bytes) continue;
    const auto& v = j.contains("value") ? j["value"] : nlohmann::json();
    if (!v.is_number()) continue;
    MetricPoint p;
    p.name = j["name"].get<std::string>();
    p.value = v.get<double>();
    if (j.contains("step") && j["step"].is_number()) p.step = j["step"].get<std::int64_t>();
    if (j.contains("epoch") && j["epoch"].is_number()) p.epoch = j["epoch"].get<std::int64_t>();
    if (j.contains("time") && j["time"].is_number()) p.time = j["time"].get<double>();
    if (j.contains("event") && j["event"].is_string())
      p.event = j["event"].get<std::string>().substr(0, kMaxEventBytes);
    out.push_back(std::move(p));
  }
  return out;
}

std::size_t admit_points(std::vector<MetricPoint>& points, int rank, SeriesCounts& counts,
                         const TelemetryLimits& limits) {
  const std::size_t before = points.size();
  std::erase_if(points, [&](const MetricPoint& p) {
    auto it = counts.find({p.name, rank});
    if (it == counts.end()) {
      if (counts.size() >= limits.max_series) return true;
      it = counts.emplace(std::make_pair(p.name, rank), 0).first;
    }
    if (it->second >= limits.max_points_per_series) return true;
    ++it->second;
    return false;
  });
  return before - points.size();
}

TelemetryIngest::TelemetryIngest(JobManager& jobs, TelemetryStore& store)
    : jobs_(jobs), store_(store) {}

TelemetryIngest::~TelemetryIngest() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void TelemetryIngest::start() {
  nvml_ = Nvml::open();
  thread_ = std::thread([this] { loop(); });
}

void TelemetryIngest::loop() {
  auto last_usage = std::chrono::steady_clock::now() - std::chrono::seconds(10);
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait_for(lock, std::chrono::seconds(1), [&] { return stop_; });
      if (stop_) return;
    }
    try {
      ingest_files();
      if (std::chrono::steady_clock::now() - last_usage >= std::chrono::milliseconds(1900)) {
        sample_usage();
        last_usage = std::chrono::steady_clock::now();
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[telemetry_ingest] %s\n", e.what());
    }
  }
}

void TelemetryIngest::ingest_files() {
  // Running jobs and those that ended since the last pass (all of them on the first pass, after
  // a restart), plus ended ones with lines still unread: never the whole job table each second.
  const double pass = now_seconds();
  std::vector<JobRecord> jobs = jobs_.active_since(last_pass_ > 0 ? last_pass_ - 5 : 0);
  for (std::int64_t id : unfinished_)
    if (std::none_of(jobs.begin(), jobs.end(), [&](const JobRecord& j) { return j.id == id; }))
      if (auto j = jobs_.get(id)) jobs.push_back(*j);
  last_pass_ = pass;
  for (const JobRecord& job : jobs) {
    // Read the state before the files: lines written before the job ended are all read below.
    const bool ended = is_terminal(job.state);
    const std::string job_dir = jobs_.paths(job.id).job_dir;
    bool complete = true;
    for (int rank = 0; rank < job.spec.ranks(); ++rank) {
      const std::string path = rank_metrics_file(job_dir, rank);
      std::error_code ec;
      const auto size = static_cast<std::int64_t>(fs::file_size(path, ec));
      if (ec) continue;
      std::int64_t offset = store_.file_offset(job.id, rank);
      if (size < offset) offset = 0;  // truncated and rewritten
      if (size == offset) continue;
      std::ifstream in(path, std::ios::binary);
      in.seekg(offset);
      std::string text(std::min<std::size_t>(size - offset, kMaxReadBytes), '\0');
      in.read(text.data(), static_cast<std::streamsize>(text.size()));
      text.resize(static_cast<std::size_t>(in.gcount()));
      // Only whole lines; a line still being written waits for the next pass (or, once the
      // job has ended, counts as whole).
      std::size_t cut = text.rfind('\n');
      cut = cut == std::string::npos ? 0 : cut + 1;
      if (ended && offset + std::int64_t(text.size()) == size) cut = text.size();
      if (cut == 0) continue;
      text.resize(cut);
      auto points = parse_metric_lines(text, limits_);
      auto counts = counts_.find(job.id);
      if (counts == counts_.end())
        counts = counts_.emplace(job.id, store_.series_counts(job.id)).first;
      if (admit_points(points, rank, counts->second, limits_) > 0 && warned_.insert(job.id).second)
        std::fprintf(stderr,
                     "[telemetry_ingest] job %lld logs more than %zu series or %lld points per "
                     "series: the rest are dropped\n",
                     static_cast<long long>(job.id), limits_.max_series,
                     static_cast<long long>(limits_.max_points_per_series));
      raise_event_alerts(job, rank, points);
      store_.add_points(job.id, rank, points, offset + std::int64_t(cut));
      if (offset + std::int64_t(cut) < size) complete = false;
      std::lock_guard lock(mutex_);
      for (const auto& p : points) last_[{job.id, rank, p.name}] = p.value;
    }
    if (ended && !complete) unfinished_.insert(job.id);
    if (ended && complete) {
      unfinished_.erase(job.id);
      counts_.erase(job.id);
      event_alerts_.erase(job.id);
      std::lock_guard lock(mutex_);
      for (auto it = last_.begin(); it != last_.end();)
        it = std::get<0>(it->first) == job.id ? last_.erase(it) : std::next(it);
    }
  }
}

void TelemetryIngest::raise_event_alerts(const JobRecord& job, int rank,
                                         const std::vector<MetricPoint>& points) {
  for (const MetricPoint& p : points) {
    if (p.event.empty()) continue;
    int& raised = event_alerts_[job.id];
    if (raised > kMaxEventAlerts) continue;
    std::string message =
        "rank " + std::to_string(rank) + " step " + std::to_string(p.step) + ": " + p.name;
    message += ++raised > kMaxEventAlerts ? ": more than " + std::to_string(kMaxEventAlerts) +
                                                " events; the rest only in the metrics file"
                                          : " (" + p.event + ")";
    jobs_.alert(job, "training_event", message);
  }
}

void TelemetryIngest::sample_usage() {
  const double now = now_seconds();
  std::map<int, GpuSample> gpus;
  if (nvml_)
    for (int i = 0; i < nvml_->device_count(); ++i)
      if (auto s = nvml_->sample(i)) gpus[i] = *s;
  std::map<std::int64_t, std::vector<UsagePoint>> by_job;
  std::vector<std::pair<std::int64_t, UsagePoint>> flat;
  for (const DeviceStatus& d : jobs_.devices()) {
    // No resident memory: the job manager has not sampled this rank yet.
    if (d.job_id == 0 || d.rank < 0 || d.memory_bytes <= 0) continue;
    UsagePoint u;
    u.rank = d.rank;
    u.device = d.device.index;
    u.time = now;
    u.cpu_utilization = d.utilization;
    u.memory_bytes = d.memory_bytes;
    if (d.device.kind == "cuda")
      if (auto g = gpus.find(d.device.index); g != gpus.end()) {
        u.gpu_utilization = g->second.utilization;
        u.gpu_memory_bytes = g->second.memory_used;
      }
    flat.emplace_back(d.job_id, u);
    // A rank's first sample has no CPU time to compare with (utilisation 0): not stored.
    if (sampled_.insert({d.job_id, d.rank}).second) continue;
    by_job[d.job_id].push_back(u);
  }
  for (const auto& [job, points] : by_job) store_.add_usage(job, points);
  std::lock_guard lock(mutex_);
  last_usage_ = std::move(flat);
  gpus_ = std::move(gpus);
}

std::map<int, GpuSample> TelemetryIngest::gpus() {
  std::lock_guard lock(mutex_);
  return gpus_;
}

std::string TelemetryIngest::metrics_text() {
  std::lock_guard lock(mutex_);
  std::ostringstream o;
  o.precision(10);
  o << "# HELP zenith_job_metric Newest value of each scalar a running job's ranks log.\n"
       "# TYPE zenith_job_metric gauge\n";
  for (const auto& [key, v] : last_)
    o << "zenith_job_metric{job=\"" << std::get<0>(key) << "\",rank=\"" << std::get<1>(key)
      << "\",name=\"" << label(std::get<2>(key)) << "\"} " << v << "\n";
  struct Gauge {
    const char* name;
    const char* help;
    double (*get)(const UsagePoint&);
  };
  const Gauge gauges[] = {
      {"zenith_rank_cpu_utilization",
       "CPU time of a rank's processes over its device's cores, 0..1.",
       [](const UsagePoint& u) { return u.cpu_utilization; }},
      {"zenith_rank_memory_bytes", "Resident memory of a rank's processes.",
       [](const UsagePoint& u) { return double(u.memory_bytes); }},
      {"zenith_rank_gpu_utilization", "GPU utilisation of a rank's device (NVML), 0..1.",
       [](const UsagePoint& u) { return u.gpu_utilization; }},
      {"zenith_rank_gpu_memory_bytes", "Memory used on a rank's GPU (NVML).",
       [](const UsagePoint& u) { return double(u.gpu_memory_bytes); }},
  };
  for (const auto& g : gauges) {
    o << "# HELP " << g.name << " " << g.help << "\n# TYPE " << g.name << " gauge\n";
    for (const auto& [job, u] : last_usage_) {
      const double v = g.get(u);
      if (v < 0) continue;  // not measured (no GPU)
      o << g.name << "{job=\"" << job << "\",rank=\"" << u.rank << "\",device=\"" << u.device
        << "\"} " << v << "\n";
    }
  }
  o << "# HELP zenith_gpu_utilization GPU utilisation (NVML), 0..1.\n"
       "# TYPE zenith_gpu_utilization gauge\n";
  for (const auto& [i, s] : gpus_)
    o << "zenith_gpu_utilization{gpu=\"" << i << "\"} " << s.utilization << "\n";
  o << "# HELP zenith_gpu_memory_used_bytes GPU memory in use (NVML).\n"
       "# TYPE zenith_gpu_memory_used_bytes gauge\n";
  for (const auto& [i, s] : gpus_)
    o << "zenith_gpu_memory_used_bytes{gpu=\"" << i << "\"} " << s.memory_used << "\n";
  o << "# HELP zenith_gpu_memory_total_bytes GPU memory (NVML).\n"
       "# TYPE zenith_gpu_memory_total_bytes gauge\n";
  for (const auto& [i, s] : gpus_)
    o << "zenith_gpu_memory_total_bytes{gpu=\"" << i << "\"} " << s.memory_total << "\n";
  return o.str();
}

}  // namespace zenith::platform
