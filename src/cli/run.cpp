// `zenith run job.yaml`: one job in the foreground, no server. Rank logs are printed with a
// "[rank N]" prefix; the exit code is the job's.
#include <cstdio>

#include "cli/client.h"
#include "cli/command.h"
#include "cli/foreground.h"
#include "platform/jobs/job_spec.h"
#include "platform/jobs/quantity.h"

namespace zenith::cli {
namespace {

int run_job_command(int argc, char** argv) {
  CLI::App app{"Run a job YAML in the foreground, without a server", "zenith run"};
  std::string file, data_dir = default_data_dir(), hang = "0", backend, partition;
  int cpu_devices = 8;
  app.add_option("job", file, "the job YAML")->required();
  app.add_option("--data", data_dir, "where the run's logs go (<data>/runs/<id>)")
      ->capture_default_str();
  app.add_option("--cpu-devices", cpu_devices, "logical CPU devices on a host without GPUs")
      ->capture_default_str();
  app.add_option("--hang-timeout", hang,
                 "alert when the job writes nothing for this long (0 = off)");
  app.add_option("--backend", backend, "local or slurm (default: the spec's, else local)");
  app.add_option("--slurm-partition", partition, "Slurm partition");
  if (auto exit_code = parse_args(app, argc, argv)) return *exit_code;

  platform::JobSpec spec;
  try {
    spec = platform::load_job_spec_file(file);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  ForegroundOptions options;
  options.data_dir = data_dir;
  options.cpu_devices = cpu_devices;
  options.hang_timeout_s = hang == "0" ? 0 : platform::parse_duration(hang).value_or(0);
  options.backend = backend;
  options.slurm_partition = partition;
  return run_spec_foreground(spec, options);
}

}  // namespace
}  // namespace zenith::cli

ZENITH_COMMAND("run", "Run a job YAML in the foreground, without a server",
               zenith::cli::run_job_command);
