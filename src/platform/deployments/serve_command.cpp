#include "platform/deployments/serve_command.h"

#include <nlohmann/json.hpp>

namespace zenith::platform {

using nlohmann::json;

namespace {

// Every option of `zenith serve` a deploy may set per service (LLM ones included; `zenith deploy
// --help` lists them), passed as `--key=value`.
constexpr const char* kServeOptionKeys[] = {
    "max-batch",     "max-delay-ms", "max-queue",           "timeout",         "max-body",
    "host",          "http-threads", "max-request-samples", "kv-cache-memory", "max-batched-tokens",
    "max-step-cost", "dtype",        "chat-template",       "threads",         "kv-cache-dtype"};

json options_of(const DeploymentRecord& r) {
  return r.options.empty() ? json::object() : json::parse(r.options);
}

}  // namespace

std::vector<std::string> serve_command(const std::string& binary, const std::string& data_dir,
                                       const DeploymentRecord& r, const ModelVersion& m,
                                       const std::string& port_file) {
  std::vector<std::string> args = {binary,
                                   "serve",
                                   m.package_dir,
                                   "--name",
                                   r.name,
                                   "--version",
                                   std::to_string(m.version),
                                   "--port",
                                   std::to_string(r.port),
                                   "--port-file",
                                   port_file,
                                   "--data",
                                   data_dir,
                                   "--replicas",
                                   std::to_string(r.replicas),
                                   "--managed"};
  json options = options_of(r);
  // One argument each (--key=value): a value that starts with '-' stays a value.
  for (const auto& key : kServeOptionKeys)
    if (options.contains(key)) {
      const auto& v = options[key];
      args.push_back(std::string("--") + key + "=" +
                     (v.is_string() ? v.get<std::string>() : v.dump()));
    }
  if (options.value("insecure-http", false)) args.push_back("--insecure-http");
  return args;
}

bool serves_insecure_http(const DeploymentRecord& r) {
  return options_of(r).value("insecure-http", false);
}

}  // namespace zenith::platform
