// `zenith token create --service NAME [--expires 30d]` prints a new service token once;
// `zenith token create --role viewer|admin` a platform API token (viewer: read-only, for
// dashboards and Prometheus); `zenith token list [--service NAME]`; `zenith token revoke ID`.
// Through the server's API, or with --local straight on DATA/zenith.db (for `zenith serve`
// without a server).
#include <cstdio>
#include <ctime>

#include "cli/client.h"
#include "cli/command.h"
#include "platform/deployments/deployment_store.h"
#include "platform/jobs/quantity.h"

namespace zenith::cli {
namespace {

using nlohmann::json;

std::string format_time(double t) {
  if (t <= 0) return "never";
  std::time_t s = std::time_t(t);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", std::gmtime(&s));
  return buf;
}

int run_token(int argc, char** argv) {
  CLI::App app{"Create, list and revoke service and platform tokens", "zenith token"};
  app.fallthrough();  // subcommands inherit it: client options may follow them
  ClientConfig config;
  add_client_options(app, config);
  bool local = false;
  app.add_flag("--local", local, "use DATA/zenith.db directly instead of the server");
  std::string service, expires, role;
  long long id = 0;
  auto* create = app.add_subcommand(
      "create", "make a token for one service, or a platform token with a role (printed once)");
  auto* service_opt = create->add_option("--service", service, "the service it opens");
  create
      ->add_option("--role", role,
                   "a platform API token: admin, or viewer (read-only: dashboards, /metrics)")
      ->check(CLI::IsMember({"admin", "viewer"}))
      ->excludes(service_opt);
  create->add_option("--expires", expires, "lifetime, e.g. 30d, 12h (default: never)");
  auto* list = app.add_subcommand("list", "tokens (never their secrets)");
  list->add_option("--service", service, "only this service's");
  auto* revoke = app.add_subcommand("revoke", "revoke a token by id");
  revoke->add_option("id", id, "token id")->required();
  app.require_subcommand(1);
  if (auto exit_code = parse_args(app, argc, argv)) return *exit_code;
  double expires_s = 0;
  if (!expires.empty()) {
    auto d = platform::parse_duration(expires);
    if (!d || *d <= 0) throw std::runtime_error("[token] bad --expires '" + expires + "'");
    expires_s = *d;
  }
  const std::string data = config.data_dir.empty() ? default_data_dir() : config.data_dir;
  std::unique_ptr<platform::DeploymentStore> store;
  if (local) store = std::make_unique<platform::DeploymentStore>(data + "/zenith.db");

  if (create->parsed()) {
    if (service.empty() == role.empty())
      throw std::runtime_error("[token] give --service NAME or --role admin|viewer");
    json t;
    if (local) {
      auto [record, secret] =
          store->create_token(service, expires_s, role.empty() ? "service" : role);
      t = platform::token_json(record);
      t["secret"] = secret;
    } else {
      auto client = make_client(config);
      json body = {{"expires_in_s", expires_s}};
      if (role.empty())
        body["service"] = service;
      else
        body["role"] = role;
      t = expect(client.post("/api/v1/tokens", body.dump()), 201);
    }
    std::printf("%s\n", t["secret"].get<std::string>().c_str());
    std::fprintf(stderr, "token %lld %s, expires %s (shown once: keep it now)\n",
                 t["id"].get<long long>(),
                 role.empty() ? ("for service " + service).c_str()
                              : ("with role " + role + " on the platform API").c_str(),
                 format_time(t["expires_at"].get<double>()).c_str());
    return 0;
  }
  if (revoke->parsed()) {
    json t;
    if (local) {
      if (!store->revoke_token(id))
        throw std::runtime_error("[token] no token with id " + std::to_string(id));
      t = platform::token_json(*store->get_token(id));
    } else {
      auto client = make_client(config);
      t = expect(client.post("/api/v1/tokens/" + std::to_string(id) + "/revoke", "{}"));
    }
    std::printf("token %lld (%s): %s\n", t["id"].get<long long>(),
                t["service"].get<std::string>().c_str(), t["state"].get<std::string>().c_str());
    return 0;
  }
  json tokens = json::array();
  if (local) {
    for (const auto& t : store->list_tokens(service)) tokens.push_back(platform::token_json(t));
  } else {
    auto client = make_client(config);
    tokens = expect(client.get("/api/v1/tokens" + (service.empty() ? "" : "?service=" + service)));
  }
  std::printf("%-6s %-20s %-12s %-8s %-17s %s\n", "ID", "SERVICE/ROLE", "PREFIX", "STATE",
              "CREATED", "EXPIRES");
  for (const auto& t : tokens)
    std::printf("%-6lld %-20s %-12s %-8s %-17s %s\n", t["id"].get<long long>(),
                (t["service"].get<std::string>().empty() ? "(" + t.value("role", "") + ")"
                                                         : t["service"].get<std::string>())
                    .c_str(),
                t["prefix"].get<std::string>().c_str(), t["state"].get<std::string>().c_str(),
                format_time(t["created_at"].get<double>()).c_str(),
                format_time(t["expires_at"].get<double>()).c_str());
  return 0;
}

}  // namespace
}  // namespace zenith::cli

ZENITH_COMMAND("token", "Create, list and revoke service and platform tokens",
               zenith::cli::run_token);
