// `zenith submit job.yaml [--follow]`: queue a job on the server.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/client.h"
#include "cli/command.h"

namespace zenith::cli {
namespace {

int run_submit(int argc, char** argv) {
  CLI::App app{"Submit a job YAML to the zenith server", "zenith submit"};
  ClientConfig config;
  std::string file;
  bool follow = false;
  app.add_option("job", file, "the job YAML")->required();
  app.add_flag("-f,--follow", follow, "stream every rank's log until the job ends");
  add_client_options(app, config);
  if (auto exit_code = parse_args(app, argc, argv)) return *exit_code;

  std::ifstream in(file);
  if (!in) throw std::runtime_error("[cli] cannot read " + file);
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json body = {{"yaml", text.str()},
                         {"source", file},
                         {"base_dir", std::filesystem::absolute(file).parent_path().string()}};
  auto client = make_client(config);
  nlohmann::json job;
  try {
    job = expect(client.post("/api/v1/jobs", body.dump()), 201);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  const long long id = job["id"];
  std::printf("submitted job %lld (%s): %s\n", id, job["name"].get<std::string>().c_str(),
              job["state"].get<std::string>().c_str());
  std::fflush(stdout);
  if (!follow) return 0;
  follow_all_ranks(client, config, id, spec_ranks(job["spec"]));
  job = expect(client.get("/api/v1/jobs/" + std::to_string(id)));
  std::printf("job %lld %s%s\n", id, job["state"].get<std::string>().c_str(),
              job["reason"].get<std::string>().empty()
                  ? ""
                  : (": " + job["reason"].get<std::string>()).c_str());
  return exit_code_for(job);
}

}  // namespace
}  // namespace zenith::cli

ZENITH_COMMAND("submit", "Submit a job YAML to the server (--follow streams its logs)",
               zenith::cli::run_submit);
