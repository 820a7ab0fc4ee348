// `zenith server`: the REST API, scheduler, executors and alert engine in one process.
#include <filesystem>
#include <fstream>

#include "cli/client.h"
#include "cli/command.h"
#include "cli/stop_signal.h"
#include "platform/exec/isolation.h"
#include "platform/http/api_server.h"
#include "platform/http/api_token.h"
#include "platform/jobs/job_manager.h"
#include "platform/jobs/quantity.h"

namespace zenith::cli {
namespace {

double duration_option(const std::string& text, const char* flag) {
  auto v = platform::parse_duration(text);
  if (!v)
    throw std::runtime_error(std::string("[server] bad duration for ") + flag + ": '" + text + "'");
  return *v;
}

int run_server(int argc, char** argv) {
  CLI::App app{"Run the job server: REST API, scheduler, executors, alerts", "zenith server"};
  platform::JobManagerOptions options;
  std::string host = "127.0.0.1", hang = "10m", grace = "3s";
  int port = 7070;
  options.data_dir = default_data_dir();
  app.add_option("--port", port, "TCP port (0 = any free port)")->capture_default_str();
  app.add_option("--host", host, "address to listen on")->capture_default_str();
  app.add_option("--data", options.data_dir, "data dir: store, token, job logs")
      ->capture_default_str();
  app.add_option("--cpu-devices", options.inventory.cpu_devices,
                 "logical CPU devices on a host without GPUs")
      ->capture_default_str();
  app.add_option("--device-kind", options.inventory.kind, "force the device kind: cpu or cuda");
  app.add_option("--backend", options.default_backend, "default backend: local or slurm")
      ->check(CLI::IsMember({"local", "slurm"}))
      ->capture_default_str();
  app.add_option("--hang-timeout", hang, "alert when a job writes nothing for this long (0 = off)")
      ->capture_default_str();
  app.add_option("--grace", grace, "SIGTERM to SIGKILL delay when stopping a job")
      ->capture_default_str();
  app.add_option("--webhook", options.webhook_url, "POST each alert as JSON to this URL");
  app.add_option("--slurm-partition", options.slurm_partition, "Slurm partition for slurm jobs");
  CLI11_PARSE(app, argc, argv);
  options.hang_timeout_s = hang == "0" ? 0 : duration_option(hang, "--hang-timeout");
  options.grace_s = duration_option(grace, "--grace");
  options.data_dir = std::filesystem::absolute(options.data_dir).string();

  std::filesystem::create_directories(options.data_dir);
  const std::string token = platform::load_or_create_token(options.data_dir);
  platform::JobManager platform(options);
  platform::ApiServer api(platform, token);
  const int bound = api.bind(host, port);
  platform.start();
  const std::string url = "http://" + host + ":" + std::to_string(bound);
  { std::ofstream(options.data_dir + "/server.url") << url << "\n"; }
  std::printf("zenith server listening on %s\n", url.c_str());
  std::printf("  data dir:  %s (token in %s/token)\n", options.data_dir.c_str(),
              options.data_dir.c_str());
  std::printf("  devices:   %zu x %s\n", platform.inventory().size(),
              platform::default_kind(platform.inventory()).c_str());
  std::printf("  isolation: %s\n", platform::isolation_support().describe().c_str());
  std::printf("  backend:   %s\n", options.default_backend.c_str());
  std::fflush(stdout);

  StopSignal stop("server", " (running jobs keep running)", [&] { api.stop(); });
  api.serve();  // returns after stop(), or when listening fails
  return 0;
}

}  // namespace
}  // namespace zenith::cli

ZENITH_COMMAND("server", "Run the job server (REST API, scheduler, executors, alerts)",
               zenith::cli::run_server);
