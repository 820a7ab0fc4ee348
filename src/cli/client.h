// What the job commands share: finding the server and token, calling the API, printing jobs.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "platform/http/api_client.h"

namespace zenith::cli {

struct ClientConfig {
  std::string server;    // --server, ZENITH_SERVER, DATA/server.url, http://127.0.0.1:7070
  std::string token;     // --token, ZENITH_TOKEN, or <data>/token
  std::string data_dir;  // --data, ZENITH_DATA, default ~/.zenith
};

// ~/.zenith, or $ZENITH_DATA.
std::string default_data_dir();

// --server, --token and --data, and a --help footer saying where each comes from when not given.
void add_client_options(CLI::App& app, ClientConfig& config);

// Fills what the flags left empty from the environment and the data dir.
platform::ApiClient make_client(ClientConfig config);

// The response as JSON when its status is `ok_status`; throws with the server's message.
nlohmann::json expect(const platform::HttpResult& r, int ok_status = 200);

std::string format_age(double since_epoch_s);
void print_job_table(const nlohmann::json& jobs, const nlohmann::json& alerts);
void print_job(const nlohmann::json& job);

// A job's ranks from its spec's JSON: devices on each of `nodes` nodes.
inline int spec_ranks(const nlohmann::json& spec) {
  return spec["devices"].get<int>() * spec.value("nodes", 1);
}

// Streams every rank's log of job `id` ("[rank N] line"); returns when all streams end.
void follow_all_ranks(platform::ApiClient& client, const ClientConfig& config, long long id,
                      int ranks);

// 0 for a job that succeeded, its exit code (or 1) for one that failed, 130 when cancelled.
int exit_code_for(const nlohmann::json& job);

}  // namespace zenith::cli
