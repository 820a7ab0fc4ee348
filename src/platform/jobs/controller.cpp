#include "platform/jobs/controller.h"

#include <sys/stat.h>

#include <filesystem>

#include "platform/exec/log_tail.h"
#include "platform/exec/rank_shim.h"
#include "platform/exec/slurm_executor.h"
#include "platform/jobs/backoff.h"
#include "platform/jobs/quantity.h"

namespace zenith::platform {

namespace fs = std::filesystem;

std::int64_t directory_usage(const std::string& dir) {
  std::int64_t total = 0;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    struct stat st;
    if (lstat(it->path().c_str(), &st) == 0 && S_ISREG(st.st_mode))
      total += static_cast<std::int64_t>(st.st_blocks) * 512;
  }
  return total;
}

namespace {

double mtime_of(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return 0;
  return st.st_mtim.tv_sec + st.st_mtim.tv_nsec * 1e-9;
}

}  // namespace

JobController::JobController(JobRecord job, JobPaths paths, ControllerOptions options,
                             ControllerHooks hooks)
    : job_(std::move(job)), paths_(std::move(paths)), options_(options), hooks_(std::move(hooks)) {}

JobController::~JobController() = default;

void JobController::raise(const std::string& kind, const std::string& message) {
  if (hooks_.alert) hooks_.alert(job_, kind, message);
}

void JobController::start(const std::vector<Device>& devices) {
  devices_ = devices;
  job_.started_at = now_seconds();
  launch();
}

void JobController::launch() {
  attempt_started_ = now_seconds();
  hang_alerted_ = false;
  oom_kills_seen_ = 0;
  job_.state = JobState::Running;
  try {
    if (job_.backend == "slurm")
      run_ = start_slurm_run(job_, paths_, options_.slurm_partition);
    else
      run_ = start_local_run(job_, paths_, devices_, options_.inherit_env);
  } catch (const std::exception& e) {
    run_.reset();
    finish(JobState::Failed, e.what(), std::nullopt);
    return;
  }
  if (hooks_.save) hooks_.save(job_);
}

void JobController::attach() {
  attempt_started_ = job_.started_at;
  if (job_.backend == "slurm")
    run_ = attach_slurm_run(job_, paths_);
  else
    run_ = attach_local_run(job_, paths_);
  if (hooks_.info) hooks_.info(job_, "re-attached to job " + std::to_string(job_.id));
}

void JobController::finish(JobState state, const std::string& reason,
                           std::optional<int> exit_code) {
  job_.state = state;
  job_.reason = reason;
  job_.exit_code = exit_code;
  job_.finished_at = now_seconds();
  if (!job_.ranks.empty()) {
    append_log_line(paths_.rank_log(0), std::string("[INFO] Job ") + to_string(state) +
                                            (reason.empty() ? "" : ": " + reason));
  }
  if (hooks_.save) hooks_.save(job_);
}

// A process can be OOM-killed without failing the job (a data-loader worker, a pipeline stage):
// alert on every new kill, not only on a failed rank.
void JobController::check_oom_kills() {
  if (!run_) return;
  int kills = run_->oom_kills();
  if (kills <= oom_kills_seen_) return;
  oom_kills_seen_ = kills;
  raise("oom", "job " + std::to_string(job_.id) + " '" + job_.spec.name + "': the kernel's OOM " +
                   "killer killed a process of the job (" + std::to_string(kills) +
                   " so far; memory limit " +
                   (job_.spec.memory_bytes > 0 ? format_size(job_.spec.memory_bytes) + " per rank"
                                               : "none") +
                   ")");
}

void JobController::check_hang() {
  double limit = job_.spec.hang_timeout_s > 0 ? job_.spec.hang_timeout_s : options_.hang_timeout_s;
  if (limit <= 0 || hang_alerted_) return;
  double last = std::max(attempt_started_, mtime_of(paths_.heartbeat()));
  for (const auto& r : job_.ranks) last = std::max(last, mtime_of(paths_.rank_log(r.rank)));
  double idle = now_seconds() - last;
  if (idle >= limit) {
    hang_alerted_ = true;
    raise("hang", "job " + std::to_string(job_.id) + " '" + job_.spec.name + "' wrote no log " +
                      "output or heartbeat for " + format_duration(idle) + " (hang_timeout " +
                      format_duration(limit) + ")");
  }
}

bool JobController::check_quota() {
  if (job_.spec.storage_bytes <= 0) return false;
  double now = now_seconds();
  if (now - last_quota_check_ < options_.quota_interval_s) return false;
  last_quota_check_ = now;
  std::int64_t used = directory_usage(paths_.job_dir);
  if (used <= job_.spec.storage_bytes) return false;
  std::string reason = "over storage quota: the job directory " + paths_.job_dir + " uses " +
                       format_size(used) + ", quota " + format_size(job_.spec.storage_bytes);
  raise("over_quota", "job " + std::to_string(job_.id) + " '" + job_.spec.name + "' " + reason);
  run_->stop(job_, options_.grace_s);
  run_.reset();
  finish(JobState::Failed, reason, std::nullopt);
  return true;
}

bool JobController::tick() {
  if (is_terminal(job_.state)) return true;
  if (relaunch_at_ > 0) {
    if (now_seconds() < relaunch_at_) return false;
    relaunch_at_ = 0;
    launch();
    return is_terminal(job_.state);
  }
  if (!run_) return is_terminal(job_.state);
  RunOutcome out = run_->poll(job_);
  check_oom_kills();
  if (out.status == RunOutcome::Running) {
    if (job_.spec.timeout_s > 0 && now_seconds() - job_.started_at > job_.spec.timeout_s) {
      std::string reason =
          "timeout: the job ran longer than " + format_duration(job_.spec.timeout_s);
      run_->stop(job_, options_.grace_s);
      run_.reset();
      finish(JobState::Failed, reason, std::nullopt);
      return true;
    }
    if (check_quota()) return true;
    check_hang();
    return false;
  }
  if (out.status == RunOutcome::Succeeded) {
    run_->stop(job_, 0);  // nothing should be left; make sure
    run_.reset();
    finish(JobState::Succeeded, "", 0);
    return true;
  }
  // A rank failed: stop its siblings at once, alert, then restart or fail the job.
  run_->stop(job_, options_.grace_s);
  run_.reset();
  std::string who = "job " + std::to_string(job_.id) + " '" + job_.spec.name + "': ";
  std::string lines;
  if (out.rank >= 0) {
    for (const auto& l : tail_lines(paths_.rank_log(out.rank), 10)) lines += "\n  " + l;
  }
  if (out.lost) {
    raise("lost", who + out.reason);
    finish(JobState::Lost, out.reason, std::nullopt);
    return true;
  }
  // An OOM kill already reported for this attempt covers the rank it failed.
  if (out.oom && oom_kills_seen_ == 0)
    raise("oom", who + out.reason + (lines.empty() ? "" : "; last log lines:" + lines));
  raise("abnormal_exit", who + out.reason + (lines.empty() ? "" : "; last log lines:" + lines));
  int code = out.signaled ? 128 + out.exit_code : out.exit_code;
  if (job_.restart_count < job_.spec.max_restarts) {
    ++job_.restart_count;
    // Exponential backoff: 1 s, 2 s, 4 s, ... up to the cap.
    const double delay = options_.restart.delay(job_.restart_count);
    std::string msg = "[INFO] Restarting job after failure (" + out.reason + "), restart " +
                      std::to_string(job_.restart_count) + " of " +
                      std::to_string(job_.spec.max_restarts) + " in " + format_duration(delay);
    append_log_line(paths_.rank_log(0), msg);
    if (hooks_.info) hooks_.info(job_, msg);
    job_.reason = "restarting after: " + out.reason;
    if (hooks_.save) hooks_.save(job_);
    relaunch_at_ = now_seconds() + delay;
    return false;
  }
  finish(JobState::Failed, out.reason, code);
  return true;
}

void JobController::cancel(const std::string& reason) {
  if (is_terminal(job_.state)) return;
  relaunch_at_ = 0;
  if (run_) {
    run_->stop(job_, options_.grace_s);
    run_.reset();
  }
  finish(JobState::Cancelled, reason, std::nullopt);
}

void JobController::detach() {
  if (run_) run_->detach();
  run_.reset();
}

}  // namespace zenith::platform
