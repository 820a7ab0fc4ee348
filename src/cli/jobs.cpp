// `zenith jobs [--state S]`: the server's jobs, with their alerts.
#include "cli/client.h"
#include "cli/command.h"

namespace zenith::cli {
namespace {

int run_jobs(int argc, char** argv) {
  CLI::App app{"List the server's jobs", "zenith jobs"};
  ClientConfig config;
  std::string state;
  bool as_json = false;
  app.add_option("--state", state,
                 "only jobs in this state (pending, running, succeeded, failed, cancelled, lost)");
  app.add_flag("--json", as_json, "print the API's JSON");
  add_client_options(app, config);
  if (auto exit_code = parse_args(app, argc, argv)) return *exit_code;
  auto client = make_client(config);
  auto jobs = expect(client.get("/api/v1/jobs" + (state.empty() ? "" : "?state=" + state)));
  if (as_json) {
    std::printf("%s\n", jobs.dump(2).c_str());
    return 0;
  }
  auto alerts = expect(client.get("/api/v1/alerts"));
  print_job_table(jobs, alerts);
  return 0;
}

}  // namespace
}  // namespace zenith::cli

ZENITH_COMMAND("jobs", "List jobs on the server, with their alerts", zenith::cli::run_jobs);
