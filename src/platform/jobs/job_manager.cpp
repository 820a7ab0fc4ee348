#include "platform/jobs/job_manager.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "platform/exec/log_tail.h"
#include "platform/exec/process_tree.h"
#include "platform/exec/slurm_executor.h"
#include "platform/jobs/alerts.h"
#include "platform/jobs/controller.h"
#include "platform/jobs/job_store.h"
#include "platform/jobs/scheduler.h"

namespace zenith::platform {

namespace fs = std::filesystem;

namespace {

// CPU ticks and resident bytes of one process, from /proc/<pid>/stat.
bool proc_usage(pid_t pid, long long* ticks, long long* rss_bytes) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(in, text)) return false;
  auto p = text.rfind(')');
  if (p == std::string::npos) return false;
  std::istringstream rest(text.substr(p + 2));
  std::string f;
  long long utime = 0, stime = 0, rss = 0;
  for (int i = 3; i <= 24 && rest >> f; ++i) {
    if (i == 14) utime = std::atoll(f.c_str());
    if (i == 15) stime = std::atoll(f.c_str());
    if (i == 24) rss = std::atoll(f.c_str());
  }
  *ticks = utime + stime;
  *rss_bytes = rss * sysconf(_SC_PAGESIZE);
  return true;
}

}  // namespace

JobManager::JobManager(JobManagerOptions options) : options_(std::move(options)) {
  fs::create_directories(options_.data_dir + "/jobs");
  inventory_ = detect_devices(options_.inventory);
  store_ = std::make_unique<JobStore>(options_.data_dir + "/zenith.db");
  webhook_ = std::make_unique<WebhookSender>(options_.webhook_url);
}

JobManager::~JobManager() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (auto& [id, c] : running_) c->detach();
  running_.clear();
}

JobPaths JobManager::paths(std::int64_t id) const {
  return {options_.data_dir + "/jobs/" + std::to_string(id), options_.data_dir};
}

std::unique_ptr<JobController> JobManager::make_controller(const JobRecord& job) {
  ControllerOptions co;
  co.hang_timeout_s = options_.hang_timeout_s;
  co.grace_s = options_.grace_s;
  co.restart = options_.restart;
  co.slurm_partition = options_.slurm_partition;
  ControllerHooks hooks;
  hooks.save = [this](const JobRecord& j) { store_->update_job(j); };
  hooks.alert = [this](const JobRecord& j, const std::string& kind, const std::string& msg) {
    record_alert(j, kind, msg);
  };
  hooks.info = [](const JobRecord& j, const std::string& line) {
    fprintf(stderr, "[server] job %lld: %s\n", static_cast<long long>(j.id), line.c_str());
  };
  return std::make_unique<JobController>(job, paths(job.id), co, hooks);
}

void JobManager::record_alert(const JobRecord& job, const std::string& kind,
                              const std::string& message) {
  Alert a;
  a.job_id = job.id;
  a.kind = kind;
  a.message = valid_utf8(message);  // it may quote a rank's log, which holds any bytes
  a.created_at = now_seconds();
  store_->add_alert(a);
  webhook_->send(a, job.spec.name);
  fprintf(stderr, "[alert] %s: %s\n", kind.c_str(), message.c_str());
}

void JobManager::start() {
  // Recover: running jobs are re-attached (their ranks outlive a server) or found lost.
  for (JobRecord& job : store_->list_jobs(JobState::Running)) {
    auto c = make_controller(job);
    c->attach();
    {
      std::lock_guard lock(mutex_);
      if (job.backend == "local")
        for (std::size_t r = 0; r < job.devices.size(); ++r)
          holders_[job.devices[r]] = {job.id, static_cast<int>(r)};
    }
    running_[job.id] = std::move(c);
  }
  thread_ = std::thread([this] { loop(); });
}

void JobManager::loop() {
  double last_sample = 0, last_prune = 0;
  // Often enough that a short retention (a test's "2s") is honoured, at most hourly.
  const double prune_every = std::clamp(options_.retention_s / 4, 1.0, 3600.0);
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait_for(lock, std::chrono::duration<double>(options_.tick_s),
                     [&] { return stop_ || !cancel_requests_.empty(); });
      if (stop_) return;
    }
    try {
      tick();
      if (now_seconds() - last_sample >= 2) {
        sample_devices();
        last_sample = now_seconds();
      }
      if (now_seconds() - last_prune >= prune_every) {
        prune();
        last_prune = now_seconds();
      }
    } catch (const std::exception& e) {
      fprintf(stderr, "[server] scheduler loop: %s\n", e.what());
    }
    done_.notify_all();
  }
}

void JobManager::tick() {
  std::set<std::int64_t> cancels;
  {
    std::lock_guard lock(mutex_);
    cancels.swap(cancel_requests_);
  }
  for (std::int64_t id : cancels) {
    if (auto it = running_.find(id); it != running_.end()) {
      it->second->cancel("cancelled by user");
    } else if (auto job = store_->get_job(id); job && job->state == JobState::Pending) {
      job->state = JobState::Cancelled;
      job->reason = "cancelled by user before it started";
      job->finished_at = now_seconds();
      store_->update_job(*job);
    }
  }
  for (auto it = running_.begin(); it != running_.end();) {
    if (it->second->tick()) {
      std::lock_guard lock(mutex_);
      for (auto h = holders_.begin(); h != holders_.end();) {
        if (h->second.first == it->first) {
          usage_.erase(h->first);
          h = holders_.erase(h);
        } else {
          ++h;
        }
      }
      it = running_.erase(it);
    } else {
      ++it;
    }
  }
  schedule_pending();
}

void JobManager::schedule_pending() {
  std::vector<JobRecord> pending = store_->list_jobs(JobState::Pending);
  if (pending.empty()) return;
  std::vector<QueuedJob> queue;
  const double now = now_seconds();
  for (const auto& j : pending) {
    if (j.backend == "slurm") {
      // Slurm queues and places the job itself.
      auto c = make_controller(j);
      c->start({});
      running_[j.id] = std::move(c);
      continue;
    }
    queue.push_back(
        {j.id, j.spec.priority, j.id, j.spec.devices, j.device_kind, now - j.submitted_at});
  }
  std::vector<FreeDevice> free;
  {
    std::lock_guard lock(mutex_);
    for (const auto& d : inventory_)
      if (!holders_.count(d.index)) free.push_back({d.index, d.kind});
  }
  SchedulerOptions so;
  so.starvation_s = options_.starvation_s;
  for (const Placement& p : schedule(queue, free, so)) {
    auto job = std::find_if(pending.begin(), pending.end(),
                            [&](const JobRecord& j) { return j.id == p.job_id; });
    job->devices = p.devices;
    std::vector<Device> devs;
    for (int idx : p.devices) devs.push_back(inventory_[idx]);
    {
      std::lock_guard lock(mutex_);
      for (std::size_t r = 0; r < p.devices.size(); ++r)
        holders_[p.devices[r]] = {job->id, static_cast<int>(r)};
    }
    auto c = make_controller(*job);
    c->start(devs);
    running_[job->id] = std::move(c);
  }
}

void JobManager::sample_devices() {
  // Per rank: CPU time and resident memory of every process in the rank's session.
  auto& last = cpu_samples_;
  const double now = now_seconds();
  const long hz = sysconf(_SC_CLK_TCK);
  std::map<int, std::pair<double, std::int64_t>> usage;
  for (const auto& [id, c] : running_) {
    const JobRecord& job = c->job();
    if (job.backend != "local") continue;
    for (const auto& r : job.ranks) {
      if (r.state != "running" || r.rank >= static_cast<int>(job.devices.size())) continue;
      long long ticks = 0, rss = 0;
      for (pid_t p : session_processes(r.pid)) {
        long long t = 0, m = 0;
        if (proc_usage(p, &t, &m)) ticks += t, rss += m;
      }
      auto key = std::make_pair(id, r.rank);
      double util = 0;
      if (auto it = last.find(key); it != last.end() && now > it->second.second) {
        const int dev = job.devices[r.rank];
        double cores = std::max<std::size_t>(1, inventory_[dev].cores.size());
        util = (ticks - it->second.first) / double(hz) / (now - it->second.second) / cores;
      }
      last[key] = {ticks, now};
      usage[job.devices[r.rank]] = {std::clamp(util, 0.0, 1.0), rss};
    }
  }
  // Forget ranks that are gone.
  for (auto it = last.begin(); it != last.end();)
    it = running_.count(it->first.first) ? std::next(it) : last.erase(it);
  std::lock_guard lock(mutex_);
  usage_ = usage;
}

void JobManager::add_prune_hook(std::function<void(std::int64_t)> hook) {
  prune_hooks_.push_back(std::move(hook));
}

void JobManager::prune() {
  for (std::int64_t id :
       store_->prune_candidates(now_seconds() - options_.retention_s, options_.retention_jobs)) {
    for (const auto& hook : prune_hooks_) hook(id);
    std::error_code ec;
    fs::remove_all(paths(id).logs_dir(), ec);
    store_->prune_job(id);
  }
}

std::vector<JobRecord> JobManager::active_since(double since) {
  return store_->active_since(since);
}

std::vector<Alert> JobManager::recent_alerts(int limit) { return store_->recent_alerts(limit); }

JobRecord JobManager::submit(JobSpec spec, const std::string& yaml) {
  JobRecord job;
  job.backend = spec.backend.empty() ? options_.default_backend : spec.backend;
  job.device_kind = spec.device_kind.empty() ? default_kind(inventory_) : spec.device_kind;
  int total = 0;
  for (const auto& d : inventory_) total += d.kind == job.device_kind;
  if (auto why = never_fits(spec.devices, job.device_kind, spec.nodes, total, job.backend))
    throw SubmitError(422, "[scheduler] rejected: " + *why);
  if (job.backend != "slurm")
    // `memory` is per rank; all of a local job's ranks share this host.
    if (auto why = never_fits_host(spec.memory_bytes * spec.ranks(), spec.storage_bytes,
                                   host_capacity(options_.data_dir)))
      throw SubmitError(422, "[scheduler] rejected: " + *why);
  job.spec = std::move(spec);
  if (job.backend == "slurm")
    if (auto why = slurm_never_fits(job, options_.slurm_partition))
      throw SubmitError(422, "[scheduler] rejected: " + *why);
  job.yaml = yaml;
  job.state = JobState::Pending;
  job.submitted_at = now_seconds();
  store_->insert_job(job);
  fs::create_directories(paths(job.id).logs_dir());
  wake_.notify_all();
  return job;
}

std::optional<JobRecord> JobManager::get(std::int64_t id) { return store_->get_job(id); }

std::vector<JobRecord> JobManager::list(std::optional<JobState> state) {
  return store_->list_jobs(state);
}

std::optional<JobRecord> JobManager::cancel(std::int64_t id, double wait_s) {
  auto job = store_->get_job(id);
  if (!job) return std::nullopt;
  if (is_terminal(job->state)) return job;
  {
    std::lock_guard lock(mutex_);
    cancel_requests_.insert(id);
  }
  wake_.notify_all();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
  while (std::chrono::steady_clock::now() < deadline) {
    job = store_->get_job(id);
    if (job && is_terminal(job->state)) break;
    std::unique_lock lock(mutex_);
    done_.wait_for(lock, std::chrono::milliseconds(100));
  }
  return job;
}

std::vector<Alert> JobManager::alerts(std::int64_t job_id) { return store_->list_alerts(job_id); }

std::vector<DeviceStatus> JobManager::devices() {
  std::lock_guard lock(mutex_);
  std::vector<DeviceStatus> out;
  for (const auto& d : inventory_) {
    DeviceStatus s;
    s.device = d;
    if (auto it = holders_.find(d.index); it != holders_.end()) {
      s.job_id = it->second.first;
      s.rank = it->second.second;
    }
    if (auto it = usage_.find(d.index); it != usage_.end()) {
      s.utilization = it->second.first;
      s.memory_bytes = it->second.second;
    }
    out.push_back(s);
  }
  return out;
}

std::string JobManager::metrics_text() {
  std::map<std::string, int> by_state = store_->count_by_state();
  for (JobState s : {JobState::Pending, JobState::Running, JobState::Succeeded, JobState::Failed,
                     JobState::Cancelled, JobState::Lost})
    by_state[to_string(s)] += 0;
  std::map<std::string, int> alerts = store_->count_alerts_by_kind();
  std::map<std::string, std::pair<int, int>> devs;  // kind → total, in use
  for (const auto& d : devices()) {
    devs[d.device.kind].first++;
    if (d.job_id) devs[d.device.kind].second++;
  }
  std::ostringstream o;
  o << "# HELP zenith_jobs Jobs known to the server, by state.\n# TYPE zenith_jobs gauge\n";
  for (const auto& [s, n] : by_state) o << "zenith_jobs{state=\"" << s << "\"} " << n << "\n";
  o << "# HELP zenith_devices Devices on this host.\n# TYPE zenith_devices gauge\n";
  for (const auto& [k, v] : devs) o << "zenith_devices{kind=\"" << k << "\"} " << v.first << "\n";
  o << "# HELP zenith_devices_in_use Devices held by running jobs.\n"
       "# TYPE zenith_devices_in_use gauge\n";
  for (const auto& [k, v] : devs)
    o << "zenith_devices_in_use{kind=\"" << k << "\"} " << v.second << "\n";
  o << "# HELP zenith_alerts_total Alerts raised, by kind.\n# TYPE zenith_alerts_total counter\n";
  for (const char* k : {"oom", "abnormal_exit", "hang", "over_quota", "lost"})
    o << "zenith_alerts_total{kind=\"" << k << "\"} " << alerts[k] << "\n";
  return o.str();
}

}  // namespace zenith::platform
