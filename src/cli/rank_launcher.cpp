// RankLauncher (--nproc as a foreground platform job) and the rank side: joining the job and
// resuming after a restart.
#include "cli/rank_launcher.h"

#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "cli/client.h"
#include "cli/foreground.h"
#include "core/shell_quote.h"
#include "platform/jobs/job_spec.h"
#include "zenith/zenith.h"

namespace zenith::cli {
namespace {

// The checkpoint in `dir` with the most training steps, "" when there is none: train's
// checkpoint_*.safetensors files or finetune's checkpoint-<step>/ directories (their step in
// trainer_state.safetensors).
std::string latest_checkpoint(const std::string& dir) {
  std::string best;
  int64_t best_step = -1;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    const bool file = name.rfind("checkpoint_", 0) == 0 && e.path().extension() == ".safetensors";
    const auto state = e.path() / "trainer_state.safetensors";
    const bool directory = name.rfind("checkpoint-", 0) == 0 && std::filesystem::exists(state);
    if (!file && !directory) continue;
    try {
      auto meta = io::read_safetensors_metadata(file ? e.path().string() : state.string());
      int64_t step = meta.count("step") ? std::stoll(meta["step"]) : 0;
      if (step > best_step) best_step = step, best = e.path().string();
    } catch (const std::exception&) {
      // unreadable: not a candidate
    }
  }
  return best;
}

}  // namespace

void RankLauncher::add_flags(CLI::App& app) {
  app.add_option("--nproc", nproc_,
                 command_ + " with N data-parallel ranks on this host (platform job)")
      ->capture_default_str();
  app.add_option("--max-restarts", max_restarts_,
                 "with --nproc: restart the job up to N times after a failure (resumes from "
                 "the newest checkpoint)")
      ->capture_default_str();
}

void RankLauncher::check(int world_env) const {
  ZENITH_CHECK(nproc_ >= 1 && max_restarts_ >= 0, "[", command_,
               "] --nproc must be >= 1 and --max-restarts >= 0");
  ZENITH_CHECK(nproc_ == 1 || world_env == 1, "[", command_, "] --nproc ", nproc_,
               " inside a job of ", world_env,
               " ranks: the platform has already started the ranks; drop --nproc");
}

int RankLauncher::launch(int argc, char** argv) const {
  std::string entry =
      shell_quote(std::filesystem::read_symlink("/proc/self/exe").string()) + " " + command_;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--nproc" || a == "--max-restarts") {
      ++i;
      continue;
    }
    if (a.rfind("--nproc=", 0) == 0 || a.rfind("--max-restarts=", 0) == 0) continue;
    entry += " " + shell_quote(a);
  }
  platform::JobSpec spec;
  spec.name = command_;
  spec.devices = nproc_;
  spec.entry = entry;
  spec.working_dir = std::filesystem::current_path().string();
  spec.max_restarts = max_restarts_;
  ForegroundOptions options;
  options.data_dir = default_data_dir();
  options.cpu_devices = std::max(8, nproc_);
  return run_spec_foreground(spec, options);
}

int env_world_size(const std::string& command) {
  for (const char* name : {"WORLD_SIZE", "RANK_SIZE"})
    if (const char* v = std::getenv(name); v && *v) {
      try {
        return std::stoi(v);
      } catch (const std::exception&) {
        ZENITH_FAIL("[", command, "] ", name, "='", v, "' is not a number");
      }
    }
  return 1;
}

Ranks join_ranks(int world_env, int64_t threads) {
  if (world_env <= 1) return Ranks();
  // One rank per device: by default as many threads as the cores the platform pinned us to.
  cpu_set_t cores;
  if (threads == 0 && !std::getenv("ZENITH_NUM_THREADS") &&
      sched_getaffinity(0, sizeof(cores), &cores) == 0)
    context::set_num_threads(std::max(1, CPU_COUNT(&cores)));
  communication::init();
  return Ranks();
}

std::string restart_checkpoint(const std::string& command, const std::string& dir) {
  const char* restarts = std::getenv("ZENITH_RESTART_COUNT");
  if (!restarts || std::atoi(restarts) <= 0) return "";
  std::string checkpoint = latest_checkpoint(dir);
  std::printf("[%s] restart %s: %s\n", command.c_str(), restarts,
              checkpoint.empty() ? "no checkpoint yet, starting over"
                                 : ("resuming from " + checkpoint).c_str());
  return checkpoint;
}

}  // namespace zenith::cli
