// The local executor: one shim per rank on this host, with the job's cgroup, affinity per
// device, PID/mount namespaces where the kernel allows them, and RLIMIT_AS as the fallback.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "platform/exec/executor.h"
#include "platform/exec/isolation.h"
#include "platform/exec/log_tail.h"
#include "platform/exec/process_tree.h"
#include "platform/exec/rank_shim.h"
#include "platform/exec/rank_table.h"
#include "platform/exec/root_cause.h"
#include "platform/jobs/quantity.h"

extern char** environ;

namespace zenith::platform {

namespace fs = std::filesystem;

namespace {

class LocalRun : public JobRun {
 public:
  LocalRun(JobPaths paths, std::unique_ptr<JobCgroup> cgroup, std::vector<bool> children)
      : paths_(std::move(paths)), cgroup_(std::move(cgroup)), children_(std::move(children)) {}

  ~LocalRun() override {
    // Reap shims that already ended so none lingers as a zombie.
    for (std::size_t i = 0; i < pids_.size(); ++i)
      if (children_[i] && pids_[i] > 0) waitpid(pids_[i], nullptr, WNOHANG);
  }

  void track(const JobRecord& job) {
    pids_.clear();
    for (const auto& r : job.ranks) pids_.push_back(r.pid);
  }

  // Failed names the root cause (root_cause.h): a rank whose entry has ended counts from its
  // rank_N.ended even while its shim still drains the log, and a failure waits for
  // root_cause_settled, so a peer that exits on the lost connection is not blamed first.
  RunOutcome poll(JobRecord& job) override {
    RunOutcome out;
    bool all_done = true;
    std::vector<RankEnd> ends;
    for (std::size_t i = 0; i < job.ranks.size(); ++i) {
      RankRecord& r = job.ranks[i];
      if (r.state == "running") update_rank(r, i);
      if (r.state == "running") {
        all_done = false;
        if (auto ex = read_rank_exit(paths_.rank_ended(r.rank)))
          ends.push_back({r.rank, ex->signaled, ex->code, ended_time(*ex, r.rank)});
        continue;
      }
      if (r.state == "lost") {
        ends.push_back({r.rank, true, 0, 0});
        continue;
      }
      ends.push_back({r.rank, r.state != "exited", r.exit_code, ended_at_[i]});
    }
    const auto cause = root_cause(ends);
    if (cause && (all_done || root_cause_settled(ends, int(job.ranks.size()), now_epoch()))) {
      RankRecord& r = job.ranks[cause->rank];
      if (r.state == "running") {  // its shim still drains the log
        r.state = cause->signaled ? "signaled" : "exited";
        r.exit_code = cause->code;
      }
      describe_failure(job, r, out);
      out.status = RunOutcome::Failed;
    } else if (!cause && all_done) {
      out.status = RunOutcome::Succeeded;
    }
    return out;
  }

  void stop(JobRecord& job, double grace_s) override {
    stopping_ = true;
    for (auto& r : job.ranks)
      if (r.state == "running") kill(r.pid, SIGTERM);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_s);
    while (std::chrono::steady_clock::now() < deadline && any_running(job)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    // Whatever is left: the whole session of each rank, then the cgroup.
    for (auto& r : job.ranks) {
      if (r.pid <= 0 || !process_alive(r.pid, r.start_time)) continue;
      kill_rank_tree(r.pid);
      kill(r.pid, SIGKILL);
    }
    if (cgroup_) cgroup_->kill_all();
    for (int i = 0; i < 100 && any_running(job); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (auto& r : job.ranks)
      if (r.state == "running") r.state = "lost", r.exit_code = SIGKILL;
  }

  void detach() override {
    if (cgroup_) cgroup_->release();
    std::fill(children_.begin(), children_.end(), false);
  }

  std::int64_t memory_usage() const override { return cgroup_ ? cgroup_->memory_usage() : 0; }
  int oom_kills() const override { return cgroup_ ? cgroup_->oom_kills() : 0; }

 private:
  bool any_running(JobRecord& job) {
    bool any = false;
    for (std::size_t i = 0; i < job.ranks.size(); ++i) {
      if (job.ranks[i].state == "running") update_rank(job.ranks[i], i);
      if (job.ranks[i].state == "running") any = true;
    }
    return any;
  }

  // Learns whether a rank's shim has ended, and how its entry ended.
  void update_rank(RankRecord& r, std::size_t i) {
    int status = 0;
    bool ended = false;
    if (i < children_.size() && children_[i]) {
      pid_t w = waitpid(r.pid, &status, WNOHANG);
      if (w == r.pid || (w < 0 && errno == ECHILD)) ended = true;
      if (w < 0) status = -1;
    } else {
      ended = !process_alive(r.pid, r.start_time);
      status = -1;
    }
    if (!ended) return;
    ended_at_[i] = now_epoch();
    if (auto ex = read_rank_exit(paths_.rank_exit(r.rank))) {
      r.state = ex->signaled ? "signaled" : "exited";
      r.exit_code = ex->code;
      ended_at_[i] = ended_time(*ex, r.rank);
    } else if (status >= 0 && WIFSIGNALED(status)) {
      // The shim itself was killed (SIGKILL by the OOM killer or an operator).
      r.state = "signaled";
      r.exit_code = WTERMSIG(status);
    } else if (status >= 0 && WIFEXITED(status)) {
      r.state = "exited";
      r.exit_code = WEXITSTATUS(status);
    } else {
      r.state = "lost";
      r.exit_code = 0;
    }
  }

  static double now_epoch() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  // When the entry ended: from its exit file, or that file's time (files of older versions).
  double ended_time(const RankExit& ex, int rank) const {
    if (ex.ended_at > 0) return ex.ended_at;
    std::error_code ec;
    const auto t = fs::last_write_time(paths_.rank_exit(rank), ec);
    if (ec) return now_epoch();
    return std::chrono::duration<double>(std::chrono::file_clock::to_sys(t).time_since_epoch())
        .count();
  }

  void describe_failure(const JobRecord& job, const RankRecord& r, RunOutcome& out) {
    out.rank = r.rank;
    out.exit_code = r.exit_code;
    out.signaled = r.state != "exited";
    const auto lines = tail_lines(paths_.rank_log(r.rank), 20);
    const bool cgroup_oom = cgroup_ && cgroup_->oom_kills() > 0;
    const bool killed_under_limit =
        job.spec.memory_bytes > 0 && r.state == "signaled" && r.exit_code == SIGKILL && !stopping_;
    // Under RLIMIT_AS a failed allocation often ends in a crash (SIGSEGV/SIGABRT) instead.
    const bool crashed_under_rlimit =
        !cgroup_ && job.spec.memory_bytes > 0 && r.state == "signaled" &&
        (r.exit_code == SIGSEGV || r.exit_code == SIGABRT || r.exit_code == SIGBUS) && !stopping_;
    out.oom = cgroup_oom || killed_under_limit || crashed_under_rlimit || looks_like_oom(lines);
    std::string rank = "rank " + std::to_string(r.rank);
    if (r.state == "lost") {
      out.lost = true;
      out.reason = rank + " ended while no server watched it and left no exit status";
    } else if (r.state == "signaled") {
      out.reason = rank + " was killed by signal " + std::to_string(r.exit_code) + " (" +
                   strsignal(r.exit_code) + ")";
    } else {
      out.reason = rank + " exited with code " + std::to_string(r.exit_code);
    }
    if (out.oom) out.reason += oom_reason(job.spec.memory_bytes, lines);
  }

  JobPaths paths_;
  std::unique_ptr<JobCgroup> cgroup_;
  std::vector<bool> children_;  // per rank: a child of this process (waitpid works)
  std::vector<pid_t> pids_;
  std::vector<double> ended_at_ = std::vector<double>(children_.size(), 0.0);
  bool stopping_ = false;
};

// What a rank gets of this process's environment: where programs are, the user's home and the
// locale (a server's own variables may hold secrets), or all of it.
std::map<std::string, std::string> base_env(bool inherit) {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv = *e;
    const auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    const std::string name = kv.substr(0, eq);
    if (inherit || name == "PATH" || name == "HOME" || name == "LANG")
      env[name] = kv.substr(eq + 1);
  }
  if (!env.count("PATH")) env["PATH"] = "/usr/local/bin:/usr/bin:/bin";
  return env;
}

// Mount points of the cgroup filesystems, which a rank sees read-only.
std::vector<std::string> cgroup_mounts() {
  std::vector<std::string> out;
  std::ifstream in("/proc/self/mountinfo");
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    std::string id, parent, dev, root, point;
    f >> id >> parent >> dev >> root >> point;
    if (point == "/sys/fs/cgroup" || point.rfind("/sys/fs/cgroup/", 0) == 0) out.push_back(point);
  }
  return out;
}

}  // namespace

std::unique_ptr<JobRun> start_local_run(JobRecord& job, const JobPaths& paths,
                                        const std::vector<Device>& devices, bool inherit_env) {
  const IsolationSupport& iso = isolation_support();
  fs::create_directories(paths.logs_dir());
  fs::create_directories(paths.work_dir());
  // The first rank's log is also the job log.
  std::error_code ec;
  if (!fs::is_symlink(paths.logs_dir() + "/job.log", ec))
    fs::create_symlink("rank_0.log", paths.logs_dir() + "/job.log", ec);
  const int world = static_cast<int>(devices.size());

  std::vector<RankInfo> infos;
  for (int r = 0; r < world; ++r) infos.push_back({r, r, devices[r].index, "127.0.0.1"});
  write_rank_table(paths.rank_table(), infos);
  job.master_port = find_free_port();

  // A fresh cgroup per attempt: a restart must not inherit the last attempt's OOM count. The
  // job's `memory` is per rank: each rank's own cgroup holds it, the job's all of them.
  const std::string cg_name = "job-" + std::to_string(job.id) + "-" + std::to_string(getpid()) +
                              "-" + std::to_string(job.restart_count);
  std::unique_ptr<JobCgroup> cgroup = JobCgroup::create(cg_name, job.spec.memory_bytes * world);
  job.cgroup = cgroup ? cgroup->path() : "";
  std::vector<std::string> rank_procs(world);
  for (int r = 0; cgroup && r < world; ++r)
    rank_procs[r] = cgroup->rank_procs_file(r, job.spec.memory_bytes);

  RankEnvContext ctx;
  ctx.job_id = std::to_string(job.id);
  ctx.job_dir = paths.job_dir;
  ctx.rank_table_file = paths.rank_table();
  ctx.master_port = job.master_port;
  ctx.world_size = world;
  ctx.restart_count = job.restart_count;

  const auto env = base_env(inherit_env);
  const fs::path job_dir = fs::path(paths.job_dir).lexically_normal();
  const fs::path data_dir = fs::path(paths.data_dir).lexically_normal();
  // The directories from DATA down to the job dir, to recreate in the tmpfs over DATA.
  std::vector<std::string> parents;
  if (!paths.data_dir.empty() && job_dir.string().rfind(data_dir.string() + "/", 0) == 0)
    for (fs::path p = job_dir; p != data_dir && p.has_relative_path(); p = p.parent_path())
      parents.insert(parents.begin(), p.string());
  const std::vector<std::string> readonly = cgroup_mounts();
  job.ranks.clear();
  auto run = std::make_unique<LocalRun>(paths, std::move(cgroup), std::vector<bool>(world, true));
  for (int r = 0; r < world; ++r) {
    RankLaunch l;
    l.rank = r;
    l.device_name = devices[r].name;
    l.cores = devices[r].cores;
    l.working_dir = job.spec.working_dir.empty() ? paths.work_dir() : job.spec.working_dir;
    l.command = job.spec.entry;
    l.env = env;
    for (const auto& [k, v] : thread_env(int(devices[r].cores.size()), devices[r].shares_cores))
      l.env[k] = v;
    for (const auto& [k, v] : memory_limit_env(job.spec.memory_bytes)) l.env[k] = v;
    for (const auto& [k, v] : job.spec.env) l.env[k] = v;
    for (const auto& [k, v] : rank_env(ctx, infos[r])) l.env[k] = v;
    if (devices[r].kind == "cuda") l.env["CUDA_VISIBLE_DEVICES"] = std::to_string(devices[r].index);
    l.log_path = paths.rank_log(r);
    l.exit_path = paths.rank_exit(r);
    l.ended_path = paths.rank_ended(r);
    l.title = "zenith rank " + std::to_string(job.id) + " " + std::to_string(r);
    l.cgroup_procs = rank_procs[r];
    // RLIMIT_AS bounds address space, not use: only the fallback when no cgroup exists.
    if (job.cgroup.empty()) l.rlimit_as = job.spec.memory_bytes;
    l.pid_namespace = iso.pid_namespace;
    l.mount_namespace = iso.mount_namespace;
    if (l.mount_namespace) {
      if (!parents.empty()) {
        l.hide_dir = data_dir.string();
        l.keep_dir = job_dir.string();
        l.keep_parents = parents;
      }
      l.readonly_mounts = readonly;
    }
    RankRecord rec;
    rec.rank = r;
    rec.device = devices[r].index;
    try {
      RankProcess p = launch_rank(l);
      rec.pid = p.pid;
      rec.start_time = p.start_time;
      rec.state = "running";
    } catch (...) {
      job.ranks.push_back(rec);
      run->track(job);
      run->stop(job, 0);
      throw;
    }
    job.ranks.push_back(rec);
  }
  run->track(job);
  return run;
}

std::unique_ptr<JobRun> attach_local_run(JobRecord& job, const JobPaths& paths) {
  auto run = std::make_unique<LocalRun>(paths, JobCgroup::open(job.cgroup),
                                        std::vector<bool>(job.ranks.size(), false));
  run->track(job);
  return run;
}

}  // namespace zenith::platform
