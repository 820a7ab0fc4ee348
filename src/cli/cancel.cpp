// `zenith cancel ID`: stop a job and its whole process tree.
#include "cli/client.h"
#include "cli/command.h"

namespace zenith::cli {
namespace {

int run_cancel(int argc, char** argv) {
  CLI::App app{"Cancel a job", "zenith cancel"};
  ClientConfig config;
  std::string id;
  app.add_option("id", id, "job id")->required();
  add_client_options(app, config);
  if (auto exit_code = parse_args(app, argc, argv)) return *exit_code;
  auto client = make_client(config);
  auto job = expect(client.post("/api/v1/jobs/" + id + "/cancel", "{}"));
  std::printf("job %s: %s\n", id.c_str(), job["state"].get<std::string>().c_str());
  return 0;
}

}  // namespace
}  // namespace zenith::cli

ZENITH_COMMAND("cancel", "Cancel a job (kills all of its processes)", zenith::cli::run_cancel);
