// `zenith server`: the REST API, scheduler, executors and alert engine in one process.
#include <arpa/inet.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "cli/client.h"
#include "cli/command.h"
#include "cli/stop_signal.h"
#include "core/atomic_file.h"
#include "platform/deployments/tls_cert.h"
#include "platform/exec/isolation.h"
#include "platform/http/api_server.h"
#include "platform/http/api_token.h"
#include "platform/http/dashboard_routes.h"
#include "platform/jobs/data_dir.h"
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

// 127.0.0.0/8, ::1 and "localhost": where plain HTTP may be served.
bool is_loopback(const std::string& host) {
  in_addr a4;
  if (inet_pton(AF_INET, host.c_str(), &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  return host == "::1" || host == "localhost";
}

// The dashboard's address, or why there is none. On a terminal the link carries the admin token
// (`?token=`, as Jupyter's does: the page keeps it and takes it out of the address bar); a
// redirected stdout, a log file others may read, never gets the token.
void print_dashboard_line(const std::string& url, const std::string& admin_token) {
  if (platform::find_web_dir().empty())
    std::printf("  dashboard: not built: %s\n", platform::missing_web_dir_message().c_str());
  else if (isatty(STDOUT_FILENO))
    std::printf("  dashboard: %s/?token=%s\n", url.c_str(), admin_token.c_str());
  else
    std::printf("  dashboard: %s/ (log in with the token in the data dir's file 'token')\n",
                url.c_str());
}

int run_server(int argc, char** argv) {
  CLI::App app{"Run the job server: REST API, scheduler, executors, alerts", "zenith server"};
  platform::JobManagerOptions options;
  std::string host = "127.0.0.1", hang = "10m", grace = "3s", retention = "30d";
  std::string restart_delay = "1s", max_restart_delay = "60s", healthy = "60s";
  std::string cert, key;
  std::vector<std::string> hosts;
  bool insecure = false;
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
  app.add_option("--cert", cert,
                 "TLS certificate (PEM) for the API; default on a non-loopback "
                 "--host: a self-signed one in DATA/tls");
  app.add_option("--key", key, "TLS private key (PEM)");
  app.add_flag("--insecure-http", insecure,
               "serve plain HTTP on a non-loopback --host (tokens travel unencrypted)");
  app.add_option("--allowed-host", hosts,
                 "a name clients use for this server (Host header); IP literals, localhost and "
                 "this machine's name are always accepted");
  app.add_option("--retention", retention,
                 "keep finished jobs' logs, metric and device series and alerts this long")
      ->capture_default_str();
  app.add_option("--retention-jobs", options.retention_jobs,
                 "and for at most this many finished jobs (newest kept)")
      ->capture_default_str();
  app.add_option("--restart-delay", restart_delay,
                 "wait before restarting a failed job (max_restarts) or a crashed service; "
                 "doubled for each failure in a row")
      ->capture_default_str();
  app.add_option("--max-restart-delay", max_restart_delay, "the cap on that wait")
      ->capture_default_str();
  app.add_option("--healthy-after", healthy,
                 "a service up this long counts its next crash as the first (a service that "
                 "crashes 5 times in a row is marked failed)")
      ->capture_default_str();
  if (auto exit_code = parse_args(app, argc, argv)) return *exit_code;
  options.hang_timeout_s = hang == "0" ? 0 : duration_option(hang, "--hang-timeout");
  options.grace_s = duration_option(grace, "--grace");
  options.retention_s = duration_option(retention, "--retention");
  options.restart.delay_s = duration_option(restart_delay, "--restart-delay");
  options.restart.max_delay_s = duration_option(max_restart_delay, "--max-restart-delay");
  options.restart.healthy_s = duration_option(healthy, "--healthy-after");
  if (options.restart.max_delay_s < options.restart.delay_s)
    throw std::runtime_error("[server] --max-restart-delay (" + max_restart_delay +
                             ") is shorter than --restart-delay (" + restart_delay + ")");
  options.data_dir = std::filesystem::absolute(options.data_dir).string();
  if (cert.empty() != key.empty())
    throw std::runtime_error("[server] give both --cert and --key, or neither");

  // The lock comes first: a second server must not touch the first one's services or files.
  platform::secure_data_dir(options.data_dir);
  platform::DataDirLock lock(options.data_dir);
  platform::ApiServerOptions api_options;
  api_options.admin_token = platform::load_or_create_token(options.data_dir);
  api_options.hosts = hosts;
  api_options.hosts.push_back(host);
  const bool tls = !cert.empty() || (!is_loopback(host) && !insecure);
  // The CLI trusts the certificate DATA/server.ca names (the self-signed one), else the
  // system's CAs.
  const std::string ca_file = options.data_dir + "/server.ca";
  std::filesystem::remove(ca_file);
  if (tls && cert.empty()) {
    auto files = platform::ensure_self_signed_cert(options.data_dir + "/tls");
    cert = files.cert, key = files.key;
    core::write_file_atomic(ca_file, cert + "\n");
  }
  api_options.cert = tls ? cert : "";
  api_options.key = tls ? key : "";
  platform::JobManager platform(options);
  platform::ApiServer api(platform, api_options);
  const int bound = api.bind(host, port);
  platform.start();
  const std::string reach = host == "0.0.0.0" || host == "::" ? "127.0.0.1" : host;
  const std::string url = std::string(tls ? "https" : "http") + "://" +
                          (reach.find(':') != std::string::npos ? "[" + reach + "]" : reach) + ":" +
                          std::to_string(bound);
  core::write_file_atomic(options.data_dir + "/server.url", url + "\n");
  std::printf("zenith server listening on %s\n", url.c_str());
  print_dashboard_line(url, api_options.admin_token);
  if (tls) std::printf("  TLS:       certificate %s (TLS 1.2+)\n", cert.c_str());
  if (!tls && !is_loopback(host))
    std::printf("  WARNING:   plain HTTP on %s (--insecure-http): tokens travel unencrypted\n",
                host.c_str());
  std::printf("  data dir:  %s (token in %s/token)\n", options.data_dir.c_str(),
              options.data_dir.c_str());
  std::printf("  devices:   %zu x %s\n", platform.inventory().size(),
              platform::default_kind(platform.inventory()).c_str());
  const auto& iso = platform::isolation_support();
  std::printf("  isolation: %s\n", iso.describe().c_str());
  if (!iso.mount_namespace || !iso.pid_namespace)
    std::printf(
        "  WARNING:   without PID and mount namespaces jobs run as this user with DATA in "
        "view: they can read its token, keys and database\n");
  std::printf("  retention: %s, at most %d finished jobs\n", retention.c_str(),
              options.retention_jobs);
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
