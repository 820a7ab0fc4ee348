// `zenith job ID`: one job in detail: spec, ranks, exit, alerts.
#include "cli/client.h"
#include "cli/command.h"

namespace zenith::cli {
namespace {

int run_job(int argc, char** argv) {
  CLI::App app{"Show one job", "zenith job"};
  ClientConfig config;
  std::string id;
  bool as_json = false;
  app.add_option("id", id, "job id")->required();
  app.add_flag("--json", as_json, "print the API's JSON");
  add_client_options(app, config);
  if (auto exit_code = parse_args(app, argc, argv)) return *exit_code;
  auto client = make_client(config);
  auto job = expect(client.get("/api/v1/jobs/" + id));
  if (as_json)
    std::printf("%s\n", job.dump(2).c_str());
  else
    print_job(job);
  return 0;
}

}  // namespace
}  // namespace zenith::cli

ZENITH_COMMAND("job", "Show one job: state, ranks, alerts", zenith::cli::run_job);
