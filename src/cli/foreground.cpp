// Runs one job spec in the foreground through the platform's controller (`zenith run`,
// `zenith train --nproc`): rank logs printed with a "[rank N]" prefix, alerts on stderr.
#include "cli/foreground.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "platform/exec/isolation.h"
#include "platform/jobs/controller.h"
#include "platform/jobs/device_inventory.h"
#include "platform/jobs/quantity.h"
#include "platform/jobs/scheduler.h"

namespace zenith::cli {
namespace {

std::atomic<int> g_signal{0};
void on_signal(int sig) { g_signal = sig; }

// Prints the new complete lines of each rank log.
class LogPrinter {
 public:
  LogPrinter(platform::JobPaths paths, int ranks) : paths_(std::move(paths)), offsets_(ranks, 0) {}
  void pump(bool flush_partial) {
    for (std::size_t r = 0; r < offsets_.size(); ++r) {
      std::ifstream in(paths_.rank_log(static_cast<int>(r)), std::ios::binary);
      if (!in) continue;
      in.seekg(static_cast<std::streamoff>(offsets_[r]));
      std::string chunk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      std::size_t end = flush_partial ? chunk.size() : chunk.rfind('\n') + 1;
      if (chunk.rfind('\n') == std::string::npos && !flush_partial) end = 0;
      std::size_t pos = 0;
      while (pos < end) {
        std::size_t nl = chunk.find('\n', pos);
        if (nl == std::string::npos || nl >= end) nl = end;
        std::printf("[rank %zu] %s\n", r, chunk.substr(pos, nl - pos).c_str());
        pos = nl + 1;
      }
      offsets_[r] += end;
    }
    std::fflush(stdout);
  }

 private:
  platform::JobPaths paths_;
  std::vector<std::uint64_t> offsets_;
};

}  // namespace

int run_spec_foreground(const platform::JobSpec& spec, const ForegroundOptions& options) {
  platform::JobRecord job;
  job.id = getpid();  // unique on this host while we run
  job.backend = !options.backend.empty() ? options.backend
                : spec.backend.empty()   ? "local"
                                         : spec.backend;
  auto inventory = platform::detect_devices({options.cpu_devices, spec.device_kind});
  job.device_kind = spec.device_kind.empty() ? platform::default_kind(inventory) : spec.device_kind;
  std::vector<platform::Device> devices;
  for (const auto& d : inventory)
    if (d.kind == job.device_kind && static_cast<int>(devices.size()) < spec.devices)
      devices.push_back(d);
  int total = 0;
  for (const auto& d : inventory) total += d.kind == job.device_kind;
  if (auto why =
          platform::never_fits(spec.devices, job.device_kind, spec.nodes, total, job.backend)) {
    std::fprintf(stderr, "[scheduler] rejected: %s\n", why->c_str());
    return 2;
  }
  for (const auto& d : devices) job.devices.push_back(d.index);
  job.spec = spec;
  job.submitted_at = platform::now_seconds();
  const std::string data_dir = std::filesystem::absolute(options.data_dir).string();
  platform::JobPaths paths{data_dir + "/runs/" + std::to_string(job.id), data_dir};
  std::filesystem::create_directories(paths.logs_dir());

  platform::ControllerOptions co;
  co.hang_timeout_s = options.hang_timeout_s;
  co.slurm_partition = options.slurm_partition;
  co.inherit_env = true;  // the ranks of `zenith run` are the user's own processes
  platform::ControllerHooks hooks;
  hooks.alert = [](const platform::JobRecord&, const std::string& kind, const std::string& msg) {
    std::fprintf(stderr, "[alert] %s: %s\n", kind.c_str(), msg.c_str());
  };
  hooks.info = [](const platform::JobRecord&, const std::string& line) {
    std::fprintf(stderr, "[run] %s\n", line.c_str());
  };
  std::fprintf(stderr, "[run] job '%s': %d rank(s) on %s, logs in %s (isolation: %s)\n",
               spec.name.c_str(), spec.ranks(),
               job.backend == "slurm" ? "slurm" : job.device_kind.c_str(), paths.logs_dir().c_str(),
               platform::isolation_support().describe().c_str());
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);

  platform::JobController controller(job, paths, co, hooks);
  controller.start(devices);
  LogPrinter printer(paths, spec.ranks());
  while (!controller.tick()) {
    printer.pump(false);
    if (g_signal) {
      controller.cancel("interrupted by signal " + std::to_string(g_signal.load()));
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  printer.pump(true);
  const auto& done = controller.job();
  std::fprintf(stderr, "[run] job %s%s\n", platform::to_string(done.state),
               done.reason.empty() ? "" : (": " + done.reason).c_str());
  if (done.state == platform::JobState::Succeeded) return 0;
  if (done.state == platform::JobState::Cancelled) return 130;
  return done.exit_code && *done.exit_code != 0 ? *done.exit_code : 1;
}

}  // namespace zenith::cli
