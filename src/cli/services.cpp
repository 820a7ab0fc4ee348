// `zenith services`: the server's online services (name, version, URL, state, requests/s);
// `zenith services undeploy NAME`, `zenith services rollback NAME [--version N]`,
// `zenith services versions NAME` (the model registry).
#include <cstdio>

#include "cli/client.h"
#include "cli/command.h"

namespace zenith::cli {
namespace {

using nlohmann::json;

void print_services(const json& services) {
  std::printf("%-20s %-8s %-11s %-28s %-9s %-9s %-9s %s\n", "NAME", "VERSION", "STATE", "URL",
              "REQ/S", "LAT_MS", "REPLICAS", "UPDATED");
  for (const auto& s : services) {
    std::string url = s["url"].get<std::string>();
    std::printf("%-20s %-8d %-11s %-28s %-9.1f %-9.2f %-9d %s\n",
                s["name"].get<std::string>().c_str(), s["version"].get<int>(),
                s["state"].get<std::string>().c_str(), url.empty() ? "-" : url.c_str(),
                s["requests_per_s"].get<double>(), s.value("latency_ms", 0.0),
                s["replicas"].get<int>(), format_age(s["updated_at"].get<double>()).c_str());
    if (!s["reason"].get<std::string>().empty())
      std::printf("  reason: %s\n", s["reason"].get<std::string>().c_str());
  }
}

int run_services(int argc, char** argv) {
  CLI::App app{"List, undeploy and roll back online services", "zenith services"};
  app.fallthrough();  // subcommands inherit it: client options may follow them
  ClientConfig config;
  add_client_options(app, config);
  std::string name;
  int version = 0;
  auto* undeploy = app.add_subcommand("undeploy", "stop a service (its versions stay registered)");
  undeploy->add_option("name", name, "service")->required();
  auto* rollback = app.add_subcommand("rollback", "serve an earlier version again");
  rollback->add_option("name", name, "service")->required();
  rollback->add_option("--version", version, "version to serve (default: the previous one)");
  auto* versions = app.add_subcommand("versions", "a service's registered model versions");
  versions->add_option("name", name, "service")->required();
  auto* list = app.add_subcommand("list", "list services (the default)");
  (void)list;
  app.require_subcommand(0, 1);
  if (auto exit_code = parse_args(app, argc, argv)) return *exit_code;
  auto client = make_client(config);
  if (undeploy->parsed()) {
    json s = expect(client.post("/api/v1/services/" + name + "/undeploy", "{}"));
    std::printf("%s: %s\n", name.c_str(), s["state"].get<std::string>().c_str());
    return 0;
  }
  if (rollback->parsed()) {
    json body = json::object();
    if (version > 0) body["version"] = version;
    json s = expect(client.post("/api/v1/services/" + name + "/rollback", body.dump()));
    std::printf("%s: serving version %d at %s (%s)\n", name.c_str(), s["version"].get<int>(),
                s["url"].get<std::string>().c_str(), s["state"].get<std::string>().c_str());
    return 0;
  }
  if (versions->parsed()) {
    json s = expect(client.get("/api/v1/services/" + name));
    std::printf("%-8s %-18s %-16s %s\n", "VERSION", "SHA256", "REGISTERED", "PACKAGE");
    for (const auto& v : s["versions"])
      std::printf("%-8d %-18.16s %-16s %s%s\n", v["version"].get<int>(),
                  v["sha256"].get<std::string>().c_str(),
                  format_age(v["created_at"].get<double>()).c_str(),
                  v["package"].get<std::string>().c_str(),
                  v["version"] == s["version"] ? "  (serving)" : "");
    return 0;
  }
  print_services(expect(client.get("/api/v1/services")));
  return 0;
}

}  // namespace
}  // namespace zenith::cli

ZENITH_COMMAND("services", "List, undeploy and roll back online services",
               zenith::cli::run_services);
