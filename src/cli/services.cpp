// `zenith services`: the server's online services (name, version, URL, state, requests/s);
// `zenith services undeploy NAME`, `zenith services rollback NAME [--version N]`,
// `zenith services versions NAME` (the model registry), `zenith services adapter add NAME
// ADAPTER=DIR` and `zenith services adapter rm NAME ADAPTER` (an LLM service's LoRA adapters,
// loaded into the running service through its admin route; a restart serves the package's).
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "cli/client.h"
#include "cli/command.h"
#include "platform/http/api_token.h"
#include "serve/llm_package.h"

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

// Calls an LLM service's admin route (/v1/load_lora_adapter, /v1/unload_lora_adapter) with the
// platform's admin token; the service's URL and certificate come from the server.
json call_service(platform::ApiClient& server, const ClientConfig& config, const std::string& name,
                  const std::string& route, const json& body) {
  json s = expect(server.get("/api/v1/services/" + name));
  const std::string url = s.value("url", "");
  if (url.empty())
    throw std::runtime_error("[services] " + name + " is not running (state " +
                             s.value("state", std::string()) + ")");
  std::string token = config.token;
  if (token.empty()) {
    const char* t = std::getenv("ZENITH_TOKEN");
    token = t && *t ? t
                    : platform::read_token(config.data_dir.empty() ? default_data_dir()
                                                                   : config.data_dir);
  }
  const std::string cert = s.value("ca_cert", "");
  platform::ApiClient service(url, token,
                              std::filesystem::is_regular_file(cert) ? cert : std::string());
  const platform::HttpResult r = service.post(route, body.dump());
  if (r.status == 0) throw std::runtime_error("[services] " + name + " at " + url + ": " + r.error);
  const json answer = json::parse(r.body, nullptr, false);
  if (r.status != 200) {
    // The service answers errors in OpenAI's envelope.
    const json error = answer.is_object() ? answer.value("error", json()) : json();
    throw std::runtime_error("[services] " + name + ": " +
                             (error.is_object() ? error.value("message", r.body) : r.body));
  }
  return answer;
}

int run_services(int argc, char** argv) {
  CLI::App app{"List, undeploy and roll back online services; manage an LLM's adapters",
               "zenith services"};
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
  auto* adapter = app.add_subcommand("adapter", "add or remove an LLM service's LoRA adapters");
  adapter->require_subcommand(1);
  std::string adapter_spec;
  auto* adapter_add =
      adapter->add_subcommand("add", "load a PEFT adapter into the running service");
  adapter_add->add_option("name", name, "service")->required();
  adapter_add->add_option("adapter", adapter_spec, "NAME=DIR: the model name and its directory")
      ->required();
  auto* adapter_rm = adapter->add_subcommand("rm", "unload an adapter from the running service");
  adapter_rm->add_option("name", name, "service")->required();
  adapter_rm->add_option("adapter", adapter_spec, "the adapter's model name")->required();
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
  if (adapter_add->parsed()) {
    auto [adapter_name, dir] = serve::parse_adapter_flag(adapter_spec);
    dir = std::filesystem::absolute(dir).lexically_normal().string();
    call_service(client, config, name, "/v1/load_lora_adapter",
                 {{"lora_name", adapter_name}, {"lora_path", dir}});
    std::printf("%s: adapter %s loaded from %s (model \"%s\")\n", name.c_str(),
                adapter_name.c_str(), dir.c_str(), adapter_name.c_str());
    return 0;
  }
  if (adapter_rm->parsed()) {
    call_service(client, config, name, "/v1/unload_lora_adapter", {{"lora_name", adapter_spec}});
    std::printf("%s: adapter %s unloaded\n", name.c_str(), adapter_spec.c_str());
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

ZENITH_COMMAND("services", "List, undeploy and roll back services; manage LLM adapters",
               zenith::cli::run_services);
