#include "platform/exec/slurm_executor.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <thread>

#include "platform/exec/log_tail.h"
#include "platform/exec/rank_shim.h"
#include "platform/exec/root_cause.h"
#include "platform/exec/slurm_scripts.h"

namespace zenith::platform {

namespace fs = std::filesystem;

CommandResult run_command(const std::string& command_line) {
  CommandResult result;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen((command_line + " 2>&1").c_str(), "r"), pclose);
  if (!pipe) return result;
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe.get())) > 0) result.output.append(buf, n);
  int status = pclose(pipe.release());
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

bool slurm_available() {
  return run_command("command -v sbatch && command -v squeue && command -v scancel").status == 0;
}

namespace {

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  std::size_t b = s.find_first_not_of(" \n");
  return b == std::string::npos ? "" : s.substr(b);
}

void write_text(const std::string& path, const std::string& text, fs::perms perms) {
  {
    std::ofstream out(path, std::ios::trunc);
    if (!out) throw std::runtime_error("[slurm] cannot write " + path);
    out << text;
  }
  fs::permissions(path, perms);
}

// GPUs in a node's gres ("gpu:4", "gpu:a100:4(S:0-1),shard:8", "(null)").
int gres_gpus(const std::string& gres) {
  int total = 0;
  std::istringstream items(gres);
  std::string item;
  while (std::getline(items, item, ',')) {
    if (item.rfind("gpu:", 0) != 0) continue;
    item = item.substr(0, item.find('('));
    try {
      total += std::stoi(item.substr(item.rfind(':') + 1));
    } catch (const std::exception&) {
      // "gpu:a100" without a count: not countable
    }
  }
  return total;
}

double mtime_of(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return 0;
  return st.st_mtim.tv_sec + st.st_mtim.tv_nsec * 1e-9;
}

class SlurmRun : public JobRun {
 public:
  SlurmRun(JobPaths paths, std::string slurm_id)
      : paths_(std::move(paths)), id_(std::move(slurm_id)) {}

  RunOutcome poll(JobRecord& job) override {
    place_ranks(job);
    // squeue lists the job while it is pending, running or completing.
    auto q = run_command("squeue -h -j " + id_ + " -o %T");
    std::string state = trim(q.output);
    const bool queued =
        q.status == 0 && !state.empty() && state.find("Invalid") == std::string::npos;
    if (queued && state == "RUNNING")
      for (auto& r : job.ranks)
        if (r.state == "pending") r.state = "running";
    // A rank that failed ends the job on every node at once (the controller scancels it),
    // whatever srun makes of the others.
    return read_exits(job, !queued);
  }

  void stop(JobRecord& job, double grace_s) override {
    run_command("scancel " + id_);
    // Slurm sends SIGTERM, then SIGKILL after its KillWait (30 s by default).
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_s + 40);
    while (std::chrono::steady_clock::now() < deadline) {
      auto q = run_command("squeue -h -j " + id_ + " -o %T");
      if (q.status != 0 || trim(q.output).empty()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    for (auto& r : job.ranks)
      if (r.state == "running" || r.state == "pending") r.state = "signaled", r.exit_code = 15;
  }

  void detach() override {}

 private:
  // Once the batch script has listed the allocation's nodes: each rank's node and local device
  // (block layout, as srun --distribution=block places the tasks).
  void place_ranks(JobRecord& job) {
    if (placed_ || job.spec.devices <= 0) return;
    auto nodes = read_slurm_nodes(paths_);
    if (!nodes || nodes->empty()) return;
    for (auto& r : job.ranks) {
      const auto node = static_cast<std::size_t>(r.rank / job.spec.devices);
      if (node < nodes->size()) r.host = (*nodes)[node].name;
      r.device = r.rank % job.spec.devices;
    }
    placed_ = true;
  }

  // The ranks' states from their exit files; Failed naming the root cause (root_cause.h) by
  // the time each entry ended (the wrapper writes it; the file's time where it did not). A rank
  // whose wrapper has not written rank_N.exit yet (its log pipe still open, or srun killed the
  // wrapper) counts by its rank_N.ended. While the job runs, a failure is decided only once
  // root_cause_settled: the rank that caused it may still be on its way. With `ended`, ranks
  // without a status were stopped by Slurm (after another rank failed) or lost.
  std::optional<RankExit> rank_status(int rank) const {
    if (auto ex = read_rank_exit(paths_.rank_exit(rank))) return ex;
    return read_rank_exit(paths_.rank_ended(rank));
  }

  RunOutcome read_exits(JobRecord& job, bool ended) {
    std::vector<RankEnd> ends;
    for (auto& r : job.ranks) {
      const auto ex = rank_status(r.rank);
      if (!ex) continue;
      r.state = ex->signaled ? "signaled" : "exited";
      r.exit_code = ex->code;
      const double at = ex->ended_at > 0 ? ex->ended_at : mtime_of(paths_.rank_exit(r.rank));
      ends.push_back({r.rank, ex->signaled, ex->code, at});
    }
    const double now =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    const auto cause = root_cause(ends);
    if (!ended && (!cause || !root_cause_settled(ends, int(job.ranks.size()), now)))
      return RunOutcome{};
    RunOutcome out;
    if (cause) {
      const RankRecord& r = job.ranks[cause->rank];
      out.status = RunOutcome::Failed;
      out.rank = cause->rank;
      out.exit_code = cause->code;
      out.signaled = cause->signaled;
      out.reason = rank_name(r) +
                   (cause->signaled ? " was killed by signal " : " exited with code ") +
                   std::to_string(cause->code);
    }
    for (auto& r : job.ranks) {
      if (rank_status(r.rank)) continue;
      if (out.rank >= 0) {
        r.state = "signaled", r.exit_code = 15;
        continue;
      }
      r.state = "lost";
      out.status = RunOutcome::Failed;
      out.rank = r.rank;
      out.signaled = true;
      out.reason = rank_name(r) + " left no exit status (" + final_state() + ")";
    }
    if (out.rank >= 0) {
      const auto lines = tail_lines(paths_.rank_log(out.rank), 20);
      out.oom = looks_like_oom(lines) || final_state().find("OUT_OF_MEMORY") != std::string::npos;
      if (out.oom) out.reason += oom_reason(job.spec.memory_bytes, lines);
    } else
      out.status = RunOutcome::Succeeded;
    return out;
  }

  static std::string rank_name(const RankRecord& r) {
    return "rank " + std::to_string(r.rank) + (r.host.empty() ? "" : " on node " + r.host);
  }

  // The final state from sacct (accounting) or scontrol (recent jobs), "unknown" otherwise.
  std::string final_state() {
    auto a = run_command("sacct -n -X -P -j " + id_ + " -o State,ExitCode");
    if (a.status == 0 && !trim(a.output).empty()) return trim(a.output);
    auto c = run_command("scontrol show job -o " + id_);
    auto pos = c.output.find("JobState=");
    if (c.status == 0 && pos != std::string::npos)
      return c.output.substr(pos, c.output.find(' ', pos) - pos);
    return "unknown";
  }

  JobPaths paths_;
  std::string id_;
  bool placed_ = false;
};

}  // namespace

std::optional<PartitionNodes> slurm_partition_nodes(const std::string& partition) {
  auto r = run_command("sinfo -h -N -o '%P|%N|%c|%G'");
  if (r.status != 0) return std::nullopt;
  PartitionNodes p;
  std::set<std::string> seen;
  std::istringstream lines(r.output);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string part, node, cpus, gres;
    if (!std::getline(fields, part, '|') || !std::getline(fields, node, '|') ||
        !std::getline(fields, cpus, '|'))
      continue;
    std::getline(fields, gres);
    const bool is_default = !part.empty() && part.back() == '*';
    if (is_default) part.pop_back();
    if (partition.empty() ? !is_default : part != partition) continue;
    if (!seen.insert(node).second) continue;
    p.name = part;
    try {
      p.cpus.push_back(std::stoi(cpus));
    } catch (const std::exception&) {
      return std::nullopt;
    }
    p.gpus.push_back(gres_gpus(gres));
  }
  if (p.cpus.empty()) return std::nullopt;
  return p;
}

std::optional<std::string> slurm_never_fits(const JobRecord& job, const std::string& partition) {
  if (!slurm_available()) return std::nullopt;
  auto nodes = slurm_partition_nodes(partition);
  if (!nodes) return std::nullopt;
  return never_fits_partition(job.spec.devices, job.device_kind, job.spec.nodes, *nodes);
}

std::unique_ptr<JobRun> start_slurm_run(JobRecord& job, const JobPaths& paths,
                                        const std::string& partition) {
  if (!slurm_available())
    throw std::runtime_error("[slurm] sbatch/squeue/scancel not found: is slurm-client installed?");
  if (auto why = slurm_never_fits(job, partition)) throw std::runtime_error("[slurm] " + *why);
  fs::create_directories(paths.logs_dir());
  fs::create_directories(paths.work_dir());
  // Nothing of an earlier attempt may pass for this one's.
  for (int r = 0; r < job.spec.ranks(); ++r) {
    fs::remove(paths.rank_exit(r));
    fs::remove(paths.rank_ended(r));
  }
  fs::remove(slurm_nodes_file(paths));
  fs::remove(paths.rank_table());
  write_text(slurm_wrapper_file(paths), slurm_rank_wrapper(job, paths), fs::perms::owner_all);
  const std::string script = paths.job_dir + "/job.sbatch";
  write_text(script, slurm_batch_script(job, paths, partition), fs::perms::owner_all);
  auto r = run_command("sbatch --parsable " + shell_quote(script));
  std::string id = trim(r.output);
  if (auto semi = id.find(';'); semi != std::string::npos) id = id.substr(0, semi);
  if (r.status != 0 || id.empty() || id.find_first_not_of("0123456789") != std::string::npos)
    throw std::runtime_error("[slurm] sbatch failed: " + trim(r.output));
  job.external_id = id;
  job.master_port = slurm_master_port(std::stoll(id));
  job.ranks.clear();
  for (int i = 0; i < job.spec.ranks(); ++i) {
    RankRecord rec;
    rec.rank = i;
    rec.device = -1;  // Slurm decides where each task lands
    rec.host = "";
    rec.state = "pending";
    job.ranks.push_back(rec);
  }
  return std::make_unique<SlurmRun>(paths, id);
}

std::unique_ptr<JobRun> attach_slurm_run(JobRecord& job, const JobPaths& paths) {
  return std::make_unique<SlurmRun>(paths, job.external_id);
}

}  // namespace zenith::platform
