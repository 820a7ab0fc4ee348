// `zenith logs ID [-f] [--rank N] [--tail N]`: a rank's log (rank 0 is the job log).
#include "cli/client.h"
#include "cli/command.h"

namespace zenith::cli {
namespace {

int run_logs(int argc, char** argv) {
  CLI::App app{"Print a job's log", "zenith logs"};
  ClientConfig config;
  std::string id;
  int rank = 0, tail = 0;
  bool follow = false;
  app.add_option("id", id, "job id")->required();
  app.add_option("--rank", rank, "which rank's log (default 0, the job log)");
  app.add_option("--tail", tail, "only the last N lines");
  app.add_flag("-f,--follow", follow, "keep streaming until the job ends");
  add_client_options(app, config);
  if (auto exit_code = parse_args(app, argc, argv)) return *exit_code;
  auto client = make_client(config);
  std::string path = "/api/v1/jobs/" + id + "/logs?rank=" + std::to_string(rank);
  if (!follow) {
    if (tail > 0) path += "&tail=" + std::to_string(tail);
    auto r = client.get(path);
    if (r.status != 200) expect(r);
    std::fwrite(r.body.data(), 1, r.body.size(), stdout);
    return 0;
  }
  std::string error_body;
  auto r = client.stream(path + "&follow=1", [&](const char* data, size_t n) {
    std::fwrite(data, 1, n, stdout);
    std::fflush(stdout);
    return true;
  });
  if (r.status != 200) expect(r);
  return 0;
}

}  // namespace
}  // namespace zenith::cli

ZENITH_COMMAND("logs", "Print or follow a job's rank logs", zenith::cli::run_logs);
