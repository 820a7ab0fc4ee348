// Deployments: the online services of `zenith server` (`zenith deploy`, `zenith services`).
// Registers model packages (versioned by name), runs one `zenith serve` child process per
// service, restarts one that dies (after 1 s, 2 s, 4 s, ... up to 60 s by default, see
// RestartPolicy; failed after 5 quick exits in a row, a healthy period up resetting the count),
// and samples each service's request rate from its /metrics. Services stop with the server and
// are started again, at the version they served, when it restarts.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "platform/deployments/deployment_store.h"
#include "platform/deployments/llm_series.h"
#include "platform/jobs/backoff.h"

namespace zenith::platform {

// A deploy error with the HTTP status it should answer.
class DeploymentError : public std::runtime_error {
 public:
  DeploymentError(int status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

struct DeployRequest {
  std::string name;
  std::string package_dir;  // a package made by `zenith deploy`; copied into the registry
  int replicas = 1;
  int port = 0;                                       // 0: any free port
  nlohmann::json options = nlohmann::json::object();  // `zenith serve` flags: serve_command.h
};

struct DeploymentView {
  DeploymentRecord record;
  double requests_per_s = 0;
  std::int64_t requests_total = 0;
  double latency_ms = 0;  // mean request latency over the last sampling interval (0: no requests)
  int crashes = 0;        // quick exits in a row (a healthy period up resets it)
};

class DeploymentManager {
 public:
  // `zenith_binary`: the program to run as `zenith serve` (this one, normally).
  DeploymentManager(std::string data_dir, std::string zenith_binary, RestartPolicy restart = {});
  ~DeploymentManager();
  DeploymentManager(const DeploymentManager&) = delete;
  DeploymentManager& operator=(const DeploymentManager&) = delete;

  // Starts the services that were running when the server stopped, and the monitor.
  void start();

  struct DeployResult {
    DeploymentRecord service;
    ModelVersion model;
    std::string token;  // a first token, when the service had no live one
    std::int64_t token_id = 0;
  };
  DeployResult deploy(const DeployRequest& request);
  DeploymentRecord undeploy(const std::string& name);
  // To `version`, or (0) the newest version older than the one served.
  DeploymentRecord rollback(const std::string& name, int version = 0);
  std::vector<DeploymentView> list();
  std::optional<DeploymentView> get(const std::string& name);
  // An LLM service's live series (LlmSeries::to_json), or null when it has none (a CNN service,
  // or not sampled yet).
  nlohmann::json llm_series(const std::string& name);
  DeploymentStore& store() { return store_; }
  const std::string& cert_path() const { return cert_path_; }

 private:
  struct Child {
    pid_t pid = 0;          // 0 while waiting to be restarted
    bool starting = false;  // launch() waits for it to come up (and reaps it if it dies)
    CrashCounter crashes;   // quick exits in a row; a healthy run resets it
    double started_at = 0;
    double restart_at = 0;  // when pid is 0: start again then
    double last_sample_at = 0;
    std::int64_t last_total = -1;
    double rate = 0;
    std::int64_t total = 0;
    double last_latency_sum = 0;  // zenith_serve_request_seconds_sum at the last sample
    double last_latency_count = -1;
    double latency_ms = 0;
    LlmSeries llm;  // an LLM service's zenith: series, sampled with the rate
  };
  // Starts `zenith serve` for `record` and waits until it has bound its port (up to 120 s),
  // releasing `lock` (on mutex_) meanwhile so that reads and other services go on. Throws
  // DeploymentError when it does not come up (the record then says "failed"), 409 when an undeploy
  // or another deploy replaced it meanwhile.
  void launch(DeploymentRecord& record, const ModelVersion& model,
              std::unique_lock<std::mutex>& lock);
  // The port child `pid` wrote to `port_file`, or 0 when it exited, did not within 120 s or the
  // manager is stopping (then it is killed and reaped).
  int wait_until_ready(pid_t pid, const std::string& port_file);
  void stop_child(const std::string& name);
  void monitor();

  std::string data_dir_, binary_, cert_path_;
  RestartPolicy restart_;
  DeploymentStore store_;
  std::mutex mutex_;  // deploys, undeploys, rollbacks and children_, one at a time
  std::map<std::string, Child> children_;
  std::atomic<bool> stop_{false};
  std::mutex wake_mutex_;
  std::condition_variable wake_;
  std::thread monitor_;
};

}  // namespace zenith::platform
