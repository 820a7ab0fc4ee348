#include "cli/client.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <thread>

#include "platform/http/api_token.h"
#include "platform/jobs/job.h"
#include "platform/jobs/quantity.h"

namespace zenith::cli {

using nlohmann::json;

std::string default_data_dir() {
  if (const char* d = std::getenv("ZENITH_DATA"); d && *d) return d;
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.zenith";
  // Not a guess in /tmp (anyone could have made /tmp/.zenith first): the account's home.
  if (const passwd* pw = getpwuid(geteuid()); pw && pw->pw_dir && *pw->pw_dir)
    return std::string(pw->pw_dir) + "/.zenith";
  throw std::runtime_error(
      "[cli] HOME is not set and this user has no home directory: pass --data DIR or set "
      "ZENITH_DATA");
}

void add_client_options(CLI::App& app, ClientConfig& c) {
  app.add_option("--server", c.server,
                 "server URL (default: $ZENITH_SERVER, else DATA/server.url, else "
                 "http://127.0.0.1:7070)");
  app.add_option("--token", c.token, "API token (default: $ZENITH_TOKEN, else DATA/token)");
  app.add_option("--data", c.data_dir,
                 "DATA, the server's data dir (default: $ZENITH_DATA, else ~/.zenith)");
  app.footer(
      "Which server and token: --server, else $ZENITH_SERVER, else the URL the server wrote to\n"
      "DATA/server.url when it started (trusting DATA/server.ca for its certificate), else\n"
      "http://127.0.0.1:7070; --token, else $ZENITH_TOKEN, else DATA/token. DATA is --data, else\n"
      "$ZENITH_DATA, else ~/.zenith. `zenith env` shows which of these variables are set.\n");
}

platform::ApiClient make_client(ClientConfig c) {
  // Without HOME, a client given --server and --token needs no data dir.
  std::string data = c.data_dir;
  if (data.empty() && (c.server.empty() || c.token.empty() || std::getenv("HOME")))
    data = default_data_dir();
  if (c.server.empty()) {
    // $ZENITH_SERVER, else where the server of the data dir says it listens (https when it
    // serves TLS), else the default port on loopback.
    const char* s = std::getenv("ZENITH_SERVER");
    std::string written;
    if (!(s && *s)) std::getline(std::ifstream(data + "/server.url"), written);
    c.server = s && *s ? s : !written.empty() ? written : "http://127.0.0.1:7070";
  }
  if (c.token.empty()) {
    const char* t = std::getenv("ZENITH_TOKEN");
    c.token = t && *t ? t : platform::read_token(data);
  }
  // A server with a self-signed certificate names it in DATA/server.ca: trust that one. Else
  // the system's CAs (a --cert from a real CA). Verification is never turned off.
  std::ifstream ca(data.empty() ? std::string() : data + "/server.ca");
  std::string cert;
  std::getline(ca, cert);
  return platform::ApiClient(c.server, c.token, cert);
}

json expect(const platform::HttpResult& r, int ok_status) {
  if (r.status == 0) throw std::runtime_error("[cli] " + r.error);
  json body;
  try {
    body = json::parse(r.body);
  } catch (...) {
    if (r.status == ok_status) return json(r.body);
    throw std::runtime_error("[cli] server answered " + std::to_string(r.status) + ": " + r.body);
  }
  if (r.status != ok_status) {
    std::string msg =
        body.is_object() && body.contains("error") ? body["error"].get<std::string>() : r.body;
    throw std::runtime_error(msg);
  }
  return body;
}

std::string format_age(double t) {
  if (t <= 0) return "-";
  return platform::format_duration(platform::now_seconds() - t) + " ago";
}

void print_job_table(const json& jobs, const json& alerts) {
  std::printf("%-6s %-24s %-10s %-8s %-8s %-9s %-16s %s\n", "ID", "NAME", "STATE", "BACKEND",
              "DEVICES", "RESTARTS", "SUBMITTED", "ALERTS / REASON");
  for (const auto& j : jobs) {
    std::string kinds;
    for (const auto& a : alerts)
      if (a["job_id"] == j["id"]) {
        std::string k = a["kind"];
        if (kinds.find(k) == std::string::npos) kinds += (kinds.empty() ? "" : ",") + k;
      }
    std::string note =
        kinds.empty() ? j.value("reason", "") : "[" + kinds + "] " + j.value("reason", "");
    if (note.size() > 70) note = note.substr(0, 67) + "...";
    std::string name = j["name"];
    if (name.size() > 24) name = name.substr(0, 21) + "...";
    std::printf("%-6lld %-24s %-10s %-8s %-8d %-9d %-16s %s\n", j["id"].get<long long>(),
                name.c_str(), j["state"].get<std::string>().c_str(),
                j["backend"].get<std::string>().c_str(), spec_ranks(j["spec"]),
                j["restart_count"].get<int>(), format_age(j["submitted_at"]).c_str(), note.c_str());
  }
}

void print_job(const json& j) {
  const json& s = j["spec"];
  std::printf("Job %lld: %s\n", j["id"].get<long long>(), j["name"].get<std::string>().c_str());
  std::printf("  state:       %s%s\n", j["state"].get<std::string>().c_str(),
              j["reason"].get<std::string>().empty()
                  ? ""
                  : (" (" + j["reason"].get<std::string>() + ")").c_str());
  if (!j["exit_code"].is_null()) std::printf("  exit code:   %d\n", j["exit_code"].get<int>());
  std::printf("  backend:     %s%s\n", j["backend"].get<std::string>().c_str(),
              j["external_id"].get<std::string>().empty()
                  ? ""
                  : (" (slurm job " + j["external_id"].get<std::string>() + ")").c_str());
  const int nodes = s.value("nodes", 1);
  std::printf("  devices:     %d x %s%s %s\n", s["devices"].get<int>(),
              j["device_kind"].get<std::string>().c_str(),
              nodes > 1 ? (" on each of " + std::to_string(nodes) + " nodes").c_str() : "",
              j["devices"].dump().c_str());
  std::printf("  entry:       %s\n", s["entry"].get<std::string>().c_str());
  if (!s["working_dir"].get<std::string>().empty())
    std::printf("  working dir: %s\n", s["working_dir"].get<std::string>().c_str());
  if (j.contains("job_dir"))
    std::printf("  job dir:     %s\n", j["job_dir"].get<std::string>().c_str());
  if (s["memory_bytes"].get<long long>() > 0)
    std::printf("  memory:      %s\n", platform::format_size(s["memory_bytes"]).c_str());
  if (s["storage_bytes"].get<long long>() > 0)
    std::printf("  storage:     %s\n", platform::format_size(s["storage_bytes"]).c_str());
  std::printf("  restarts:    %d of %d\n", j["restart_count"].get<int>(),
              s["max_restarts"].get<int>());
  std::printf("  submitted:   %s\n", format_age(j["submitted_at"]).c_str());
  if (j["started_at"].get<double>() > 0)
    std::printf("  started:     %s\n", format_age(j["started_at"]).c_str());
  if (j["finished_at"].get<double>() > 0)
    std::printf("  finished:    %s\n", format_age(j["finished_at"]).c_str());
  if (!j["ranks"].empty()) {
    std::printf("  ranks:\n");
    for (const auto& r : j["ranks"])
      std::printf("    rank %-3d node %-10s device %-3d pid %-8d %s%s\n", r["rank"].get<int>(),
                  r["host"].get<std::string>().c_str(), r["device"].get<int>(), r["pid"].get<int>(),
                  r["state"].get<std::string>().c_str(),
                  r["state"] == "running" || r["state"] == "pending"
                      ? ""
                      : (" " + std::to_string(r["exit_code"].get<int>())).c_str());
  }
  if (j.contains("alerts") && !j["alerts"].empty()) {
    std::printf("  alerts:\n");
    for (const auto& a : j["alerts"])
      std::printf("    [%s] %s\n", a["kind"].get<std::string>().c_str(),
                  a["message"].get<std::string>().c_str());
  }
}

void follow_all_ranks(platform::ApiClient&, const ClientConfig& config, long long id, int ranks) {
  std::mutex out_mutex;
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      platform::ApiClient client = make_client(config);
      std::string pending;
      const std::string prefix = ranks > 1 ? "[rank " + std::to_string(r) + "] " : "";
      client.stream(
          "/api/v1/jobs/" + std::to_string(id) + "/logs?follow=1&rank=" + std::to_string(r),
          [&](const char* data, size_t n) {
            pending.append(data, n);
            std::size_t nl;
            std::lock_guard lock(out_mutex);
            while ((nl = pending.find('\n')) != std::string::npos) {
              std::printf("%s%s\n", prefix.c_str(), pending.substr(0, nl).c_str());
              pending.erase(0, nl + 1);
            }
            std::fflush(stdout);
            return true;
          });
      std::lock_guard lock(out_mutex);
      if (!pending.empty()) std::printf("%s%s\n", prefix.c_str(), pending.c_str());
    });
  }
  for (auto& t : threads) t.join();
}

int exit_code_for(const json& job) {
  const std::string state = job["state"];
  if (state == "succeeded") return 0;
  if (state == "cancelled") return 130;
  if (!job["exit_code"].is_null() && job["exit_code"].get<int>() != 0) return job["exit_code"];
  return 1;
}

}  // namespace zenith::cli
