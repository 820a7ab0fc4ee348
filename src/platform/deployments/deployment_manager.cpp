#include "platform/deployments/deployment_manager.h"

#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "core/atomic_file.h"
#include "platform/deployments/serve_command.h"
#include "platform/deployments/service_metrics.h"
#include "platform/deployments/tls_cert.h"
#include "platform/http/api_token.h"
#include "platform/jobs/quantity.h"

extern char** environ;

namespace zenith::platform {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool valid_name(const std::string& name) {
  static const std::regex re("[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?");
  return std::regex_match(name, re);
}

std::string tail_of(const std::string& path, size_t bytes) {
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.size() > bytes) text = text.substr(text.size() - bytes);
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

bool process_alive(pid_t pid) { return pid > 0 && kill(pid, 0) == 0; }

constexpr int kMaxQuickExits = 5;  // in a row, then the service is marked failed

}  // namespace

DeploymentManager::DeploymentManager(std::string data_dir, std::string zenith_binary,
                                     RestartPolicy restart)
    : data_dir_(std::move(data_dir)),
      binary_(std::move(zenith_binary)),
      restart_(restart),
      store_(data_dir_ + "/zenith.db") {
  fs::create_directories(data_dir_ + "/models");
  fs::create_directories(data_dir_ + "/services");
  cert_path_ = ensure_self_signed_cert(data_dir_ + "/tls").cert;
}

DeploymentManager::~DeploymentManager() {
  stop_ = true;
  wake_.notify_all();
  if (monitor_.joinable()) monitor_.join();
  std::lock_guard lock(mutex_);
  std::vector<std::string> names;
  for (const auto& [name, child] : children_) names.push_back(name);
  for (const auto& name : names) stop_child(name);
}

void DeploymentManager::start() {
  {
    std::unique_lock lock(mutex_);
    for (auto record : store_.list_services()) {
      if (record.state != "running" && record.state != "starting") continue;
      // A child of a previous server run (killed without stopping it) holds the port.
      if (process_alive(record.pid)) {
        std::ifstream cmd("/proc/" + std::to_string(record.pid) + "/cmdline");
        std::string line((std::istreambuf_iterator<char>(cmd)), std::istreambuf_iterator<char>());
        if (line.find("serve") != std::string::npos) kill(record.pid, SIGTERM);
      }
      auto model = store_.model_version(record.name, record.version);
      if (!model) continue;
      try {
        launch(record, *model, lock);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "[services] cannot restart %s: %s\n", record.name.c_str(), e.what());
      }
    }
  }
  monitor_ = std::thread([this] { monitor(); });
}

void DeploymentManager::launch(DeploymentRecord& r, const ModelVersion& model,
                               std::unique_lock<std::mutex>& lock) {
  const std::string dir = data_dir_ + "/services/" + r.name;
  fs::create_directories(dir);
  const std::string port_file = dir + "/port", log = dir + "/service.log";
  fs::remove(port_file);
  std::vector<std::string> args = serve_command(binary_, data_dir_, r, model, port_file);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);  // the server blocks SIGTERM; the child must not
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, binary_.c_str(), &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0)
    throw DeploymentError(500, "[services] cannot start " + binary_ + ": " + strerror(rc));

  // The child is this service's from now on (an undeploy or a new deploy stops it), but its
  // start is not watched by the monitor: the wait below owns it.
  r.pid = pid;
  r.state = "starting";
  r.reason.clear();
  store_.put_service(r);
  Child& child = children_[r.name];  // a restart keeps its crash count
  child.pid = pid;
  child.starting = true;
  child.restart_at = 0;

  // Loading the model takes a while: reads and other services go on meanwhile.
  lock.unlock();
  const int port = wait_until_ready(pid, port_file);
  lock.lock();
  auto it = children_.find(r.name);
  if (it == children_.end() || it->second.pid != pid)
    throw DeploymentError(
        409, "[services] " + r.name + " was undeployed or deployed again while it started");
  it->second.starting = false;
  if (stop_) throw DeploymentError(503, "[services] the server is stopping");
  if (port <= 0) {
    it->second.pid = 0;
    r.state = "failed";
    r.pid = 0;
    r.reason = "did not start: " + tail_of(log, 600);
    store_.put_service(r);
    throw DeploymentError(500, "[services] " + r.name + " " + r.reason);
  }
  r.bound_port = port;
  r.url = std::string(serves_insecure_http(r) ? "http" : "https") +
          "://127.0.0.1:" + std::to_string(port);
  r.state = "running";
  store_.put_service(r);
  it->second.started_at = unix_now();
}

int DeploymentManager::wait_until_ready(pid_t pid, const std::string& port_file) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (true) {
    std::ifstream in(port_file);
    int port = 0;
    if (in >> port && port > 0) return port;
    if (waitpid(pid, nullptr, WNOHANG) != 0) return 0;  // exited, or stop_child() reaped it
    if (stop_ || std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      return 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void DeploymentManager::stop_child(const std::string& name) {
  auto it = children_.find(name);
  if (it == children_.end()) return;
  const pid_t pid = it->second.pid;
  children_.erase(it);
  if (pid <= 0) return;
  kill(pid, SIGTERM);
  for (int i = 0; i < 100; ++i) {
    // A starting child may have been reaped by its launch() already (ECHILD).
    if (const pid_t w = waitpid(pid, nullptr, WNOHANG); w == pid || w < 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

DeploymentManager::DeployResult DeploymentManager::deploy(const DeployRequest& req) {
  if (!valid_name(req.name))
    throw DeploymentError(400, "[services] bad service name '" + req.name +
                                   "': lowercase letters, digits and '-', at most 63 characters");
  if (req.replicas < 1 || req.replicas > 64)
    throw DeploymentError(400, "[services] replicas must be 1..64");
  if (req.port < 0 || req.port > 65535) throw DeploymentError(400, "[services] bad port");
  if (req.package_dir.empty() || !fs::is_regular_file(req.package_dir + "/package.json"))
    throw DeploymentError(400, "[services] '" + req.package_dir + "' is not a model package");
  std::string hash;
  json manifest;
  try {
    hash = package_content_hash(req.package_dir);
    std::ifstream in(req.package_dir + "/package.json");
    manifest = json::parse(in);
  } catch (const std::exception& e) {
    throw DeploymentError(400, std::string("[services] ") + e.what());
  }
  if (manifest.value("sha256", "") != hash)
    throw DeploymentError(400, "[services] " + req.package_dir +
                                   ": content hash mismatch (the package was modified)");

  std::unique_lock lock(mutex_);
  const int version = store_.next_model_version(req.name);
  const std::string dest = data_dir_ + "/models/" + req.name + "/v" + std::to_string(version);
  fs::remove_all(dest);
  fs::create_directories(dest);
  // Each file lands whole and on disk before the version is registered (a crash in between
  // leaves a directory the next deploy of this name replaces).
  std::vector<std::string> files = package_files(manifest);
  files.push_back("package.json");
  for (const std::string& f : files) {
    fs::create_directories(fs::path(dest + "/" + f).parent_path());
    core::copy_file_atomic(req.package_dir + "/" + f, dest + "/" + f);
  }
  ModelVersion model = store_.add_model_version(req.name, dest, hash);

  DeploymentRecord r = store_.get_service(req.name).value_or(DeploymentRecord{});
  stop_child(req.name);
  r.name = req.name;
  r.version = model.version;
  r.port = req.port;
  r.replicas = req.replicas;
  r.options = req.options.dump();
  r.bound_port = 0;
  r.url.clear();
  launch(r, model, lock);

  DeployResult out{r, model, "", 0};
  const auto live = store_.live_tokens();
  if (std::none_of(live.begin(), live.end(),
                   [&](const TokenRecord& t) { return t.service == r.name; })) {
    auto [token, secret] = store_.create_token(r.name);
    out.token = secret;
    out.token_id = token.id;
  }
  return out;
}

DeploymentRecord DeploymentManager::undeploy(const std::string& name) {
  std::lock_guard lock(mutex_);
  auto r = store_.get_service(name);
  if (!r) throw DeploymentError(404, "[services] no service named '" + name + "'");
  stop_child(name);
  r->state = "undeployed";
  r->pid = 0;
  r->bound_port = 0;
  r->url.clear();
  store_.put_service(*r);
  return *r;
}

DeploymentRecord DeploymentManager::rollback(const std::string& name, int version) {
  std::unique_lock lock(mutex_);
  auto r = store_.get_service(name);
  if (!r) throw DeploymentError(404, "[services] no service named '" + name + "'");
  std::optional<ModelVersion> target;
  if (version > 0) {
    target = store_.model_version(name, version);
    if (!target)
      throw DeploymentError(404,
                            "[services] " + name + " has no version " + std::to_string(version));
  } else {
    for (const auto& v : store_.model_versions(name))  // newest first
      if (v.version < r->version) {
        target = v;
        break;
      }
    if (!target)
      throw DeploymentError(409, "[services] " + name + " has no version older than " +
                                     std::to_string(r->version) + " to roll back to");
  }
  stop_child(name);
  r->version = target->version;
  launch(*r, *target, lock);
  return *r;
}

std::vector<DeploymentView> DeploymentManager::list() {
  std::vector<DeploymentView> out;
  std::lock_guard lock(mutex_);
  for (auto& r : store_.list_services()) {
    DeploymentView v{r, 0, 0, 0};
    if (auto it = children_.find(r.name); it != children_.end()) {
      v.requests_per_s = it->second.rate;
      v.requests_total = it->second.total;
      v.latency_ms = it->second.latency_ms;
      v.crashes = it->second.crashes.crashes;
    }
    out.push_back(std::move(v));
  }
  return out;
}

std::optional<DeploymentView> DeploymentManager::get(const std::string& name) {
  for (auto& v : list())
    if (v.record.name == name) return v;
  return std::nullopt;
}

nlohmann::json DeploymentManager::llm_series(const std::string& name) {
  std::lock_guard lock(mutex_);
  auto it = children_.find(name);
  return it == children_.end() || it->second.llm.empty() ? nlohmann::json()
                                                         : it->second.llm.to_json();
}

void DeploymentManager::monitor() {
  double sampled_at = 0;
  while (!stop_) {
    {
      // Exits and due restarts are handled each tick (a restart is late by at most one tick);
      // rates are sampled each second.
      std::unique_lock lock(wake_mutex_);
      wake_.wait_for(lock, std::chrono::milliseconds(200), [this] { return stop_.load(); });
    }
    if (stop_) break;
    const bool sample = unix_now() - sampled_at >= 1;
    if (sample) sampled_at = unix_now();
    // Restart children that died, backing off; a service that keeps dying is marked failed.
    std::vector<std::pair<std::string, std::string>> endpoints;  // name, url
    {
      std::unique_lock lock(mutex_);
      const double now = unix_now();
      std::vector<std::string> failed;
      for (auto& [name, child] : children_) {
        int status = 0;
        if (child.pid <= 0 || child.starting || waitpid(child.pid, &status, WNOHANG) != child.pid)
          continue;
        child.pid = 0;
        const int quick = child.crashes.on_exit(now - child.started_at, restart_.healthy_s);
        auto r = store_.get_service(name);
        if (!r) continue;
        const std::string log = data_dir_ + "/services/" + name + "/service.log";
        if (quick >= kMaxQuickExits) {
          r->state = "failed";
          r->pid = 0;
          r->reason = "exited " + std::to_string(quick) +
                      " times in a row; last output: " + tail_of(log, 400);
          store_.put_service(*r);
          failed.push_back(name);
          continue;
        }
        const double delay = restart_.delay(quick);
        child.restart_at = now + delay;
        r->state = "starting";
        r->pid = 0;
        r->reason = "exited (" + std::to_string(quick) + " in a row); restarting in " +
                    format_duration(delay);
        store_.put_service(*r);
        // The decision, stamped (Unix seconds): what a restart's wait is measured from.
        std::fprintf(stderr, "[services] %s exited (%d in a row) at %.3f; restarting in %s\n",
                     name.c_str(), quick, now, format_duration(delay).c_str());
      }
      for (const auto& name : failed) children_.erase(name);
      std::vector<std::string> due;
      for (const auto& [name, child] : children_)
        if (child.pid <= 0 && child.restart_at > 0 && now >= child.restart_at) due.push_back(name);
      // One at a time; launch() lets go of the lock while each comes up.
      for (const auto& name : due) {
        // A deploy or undeploy may have come in while the previous one started.
        if (auto it = children_.find(name);
            it == children_.end() || it->second.pid > 0 || it->second.restart_at <= 0)
          continue;
        auto r = store_.get_service(name);
        auto model = r ? store_.model_version(name, r->version) : std::nullopt;
        if (!model) {
          children_.erase(name);  // its record or version is gone: nothing to restart
          continue;
        }
        try {
          launch(*r, *model, lock);
        } catch (const std::exception& e) {
          if (stop_) break;
          const auto* error = dynamic_cast<const DeploymentError*>(&e);
          auto it = children_.find(name);
          if ((error && error->status() == 409) || it == children_.end()) continue;  // replaced
          std::fprintf(stderr, "[services] cannot restart %s: %s\n", name.c_str(), e.what());
          const int quick = it->second.crashes.on_exit(0, restart_.healthy_s);
          if (quick >= kMaxQuickExits)
            children_.erase(it);  // launch() marked it failed
          else
            it->second.restart_at = unix_now() + restart_.delay(quick);
        }
      }
      if (stop_) break;
      for (const auto& [name, child] : children_)
        if (auto r = sample ? store_.get_service(name) : std::nullopt;
            child.pid > 0 && r && !r->url.empty())
          endpoints.emplace_back(name, r->url);
    }
    // Request rates from each service's /metrics (outside the lock: a slow service must not
    // hold up deploys), with the server's own token: every service's /metrics needs one.
    const std::string token = endpoints.empty() ? std::string() : read_token(data_dir_);
    for (const auto& [name, url] : endpoints) {
      httplib::Client client(url);
      if (!token.empty()) client.set_bearer_token_auth(token);
      client.enable_server_certificate_verification(true);
      client.set_ca_cert_path(cert_path_.c_str());
      client.set_connection_timeout(1);
      client.set_read_timeout(2);
      auto res = client.Get("/metrics");
      if (!res || res->status != 200) continue;
      const std::int64_t total = model_requests(res->body);
      const double now = unix_now();
      std::lock_guard lock(mutex_);
      auto it = children_.find(name);
      if (it == children_.end()) continue;
      Child& c = it->second;
      if (c.last_total >= 0 && now > c.last_sample_at)
        c.rate = double(total - c.last_total) / (now - c.last_sample_at);
      c.last_total = total;
      c.last_sample_at = now;
      c.total = total;
      c.llm.add(now, res->body);
      const double lat_sum = metric_value(res->body, "zenith_serve_request_seconds_sum");
      const double lat_count = metric_value(res->body, "zenith_serve_request_seconds_count");
      if (c.last_latency_count >= 0 && lat_count > c.last_latency_count)
        c.latency_ms = 1e3 * (lat_sum - c.last_latency_sum) / (lat_count - c.last_latency_count);
      else if (c.last_latency_count >= 0)
        c.latency_ms = 0;  // no requests in this interval
      c.last_latency_sum = lat_sum;
      c.last_latency_count = lat_count;
    }
  }
}

}  // namespace zenith::platform
