#include "platform/http/api_server.h"

#include <httplib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "platform/deployments/deployment_store.h"
#include "platform/exec/executor.h"
#include "platform/exec/log_tail.h"
#include "platform/http/api_token.h"
#include "platform/http/dashboard_routes.h"
#include "platform/http/deployment_routes.h"
#include "platform/http/http_guard.h"
#include "platform/http/reply.h"
#include "platform/jobs/job_manager.h"
#include "platform/jobs/job_spec.h"
#include "platform/jobs/quantity.h"

namespace zenith::platform {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr std::int64_t kLogPiece = 64 * 1024;
constexpr int kFollowsPerClient = 32;  // `zenith logs -f` opens one stream per rank
constexpr int kFollowsTotal = 128;

// A non-negative integer query parameter, or `fallback` when absent; nullopt when malformed.
std::optional<std::int64_t> int_param(const httplib::Request& req, const char* name,
                                      std::int64_t fallback) {
  if (!req.has_param(name)) return fallback;
  const std::string v = req.get_param_value(name);
  if (v.empty() || v.size() > 18 || v.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return std::stoll(v);
}

}  // namespace

struct ApiServer::Impl {
  JobManager& jobs;
  ApiServerOptions options;
  TokenVerifier platform_tokens;  // admin and viewer tokens made with `zenith token create`
  std::unique_ptr<GuardedServer> server_ptr;
  GuardedServer& server;
  std::unique_ptr<DeploymentRoutes> services;  // online services, model registry, service tokens
  std::unique_ptr<Dashboard> dashboard;        // the web UI at / and its metrics
  std::mutex follow_mutex;
  std::map<std::string, int> follows;  // open follow streams per client address
  int follows_total = 0;

  Impl(JobManager& p, ApiServerOptions o)
      : jobs(p),
        options(std::move(o)),
        platform_tokens(p.options().data_dir + "/zenith.db", ""),
        server_ptr(make_server()),
        server(*server_ptr) {}

  std::unique_ptr<GuardedServer> make_server() {
    HttpLimits limits;
    limits.max_body_bytes = options.max_body_bytes;
    limits.component = "api";
    auto s = options.cert.empty()
                 ? std::make_unique<GuardedServer>(limits)
                 : std::make_unique<GuardedServer>(limits, options.cert, options.key);
    for (const auto& h : options.hosts) s->allow_host(h);
    s->set_gate([this](const httplib::Request& req) { return gate(req); });
    return s;
  }

  // Who may do what, decided before a body is read: the static shell and /healthz are open;
  // everything else needs a token; a viewer only reads, and not the token list.
  std::optional<GateRefusal> gate(const httplib::Request& req) {
    const bool read = req.method == "GET" || req.method == "HEAD";
    if (read && (req.path == "/healthz" || req.path == "/" || req.path.rfind("/ui/", 0) == 0))
      return std::nullopt;
    const std::string h = req.get_header_value("Authorization");
    const std::string secret = h.rfind("Bearer ", 0) == 0 ? h.substr(7) : "";
    std::string role;
    if (!secret.empty() && token_equals(secret, options.admin_token)) {
      role = "admin";
    } else if (auto t = platform_tokens.find(secret); t && t->service.empty()) {
      role = t->role;
    } else {
      return GateRefusal{
          401, h.empty() ? "[api] missing 'Authorization: Bearer <token>' (the admin token is in "
                           "the server's data dir, file 'token'; `zenith token create --role "
                           "viewer` makes a read-only one)"
                         : "[api] invalid bearer token (unknown, expired or revoked)"};
    }
    if (role != "admin" && (!read || req.path.rfind("/api/v1/tokens", 0) == 0))
      return GateRefusal{403, "[api] a " + role + " token only reads: " + req.method + " " +
                                  req.path + " needs an admin token"};
    set_request_role(req, role);
    return std::nullopt;
  }

  // The job named by the path's first capture, or a 404 already written.
  std::optional<JobRecord> job_from_path(const httplib::Request& req, httplib::Response& res) {
    std::int64_t id = 0;
    try {
      std::size_t used = 0;
      id = std::stoll(req.matches[1].str(), &used);
      if (used != req.matches[1].str().size()) id = 0;  // "1x" is no id, not job 1
    } catch (...) {
    }
    auto job = id > 0 ? jobs.get(id) : std::nullopt;
    if (!job) reply_error(res, 404, "[api] no job with id '" + req.matches[1].str() + "'");
    return job;
  }

  void submit(const httplib::Request& req, httplib::Response& res) {
    auto parsed = parse_json_body(req.body, res, "api");
    if (!parsed) return;
    json& body = *parsed;
    if (!body.is_object())
      return reply_error(res, 400,
                         "[api] the body must be a JSON object: {\"yaml\": \"...\"} or "
                         "{\"job\": {...}}");
    std::string yaml, source = "<request>", base_dir;
    if (body.contains("yaml")) {
      if (!body["yaml"].is_string()) return reply_error(res, 400, "[api] 'yaml' must be a string");
      yaml = body["yaml"].get<std::string>();
      // yaml-cpp parses flow collections recursively: a deep one would overflow the stack.
      if (nesting_depth(yaml, false) > kMaxJsonDepth)
        return reply_error(res, 400,
                           "[api] the job YAML is nested deeper than " +
                               std::to_string(kMaxJsonDepth) + " levels");
      if (body.contains("source") && body["source"].is_string()) source = body["source"];
      if (body.contains("base_dir") && body["base_dir"].is_string()) base_dir = body["base_dir"];
    } else if (body.contains("job")) {
      // JSON is YAML: the spec object goes through the same parser and validation.
      yaml = json{{"job", body["job"]}}.dump(2);
      source = "<request body>";
    } else {
      return reply_error(res, 400,
                         "[api] the body must be {\"yaml\": \"<job yaml>\"} or a spec "
                         "{\"job\": {...}}");
    }
    JobSpec spec;
    try {
      spec = parse_job_spec(yaml, source);
    } catch (const SpecError& e) {
      json issues = json::array();
      for (const auto& i : e.issues())
        issues.push_back({{"line", i.line}, {"column", i.column}, {"message", i.message}});
      return reply_json(res, 400, {{"error", e.what()}, {"issues", issues}});
    }
    if (spec.working_dir.empty()) {
      spec.working_dir = base_dir;  // empty: the job's own work dir
    } else if (fs::path(spec.working_dir).is_relative()) {
      if (base_dir.empty())
        return reply_error(res, 400,
                           "[job_spec] " + source + ": 'job.working_dir' is relative ('" +
                               spec.working_dir + "') and the request names no base_dir");
      spec.working_dir = (fs::path(base_dir) / spec.working_dir).lexically_normal().string();
    }
    try {
      JobRecord job = jobs.submit(std::move(spec), yaml);
      reply_json(res, 201, job_to_json(job));
    } catch (const SubmitError& e) {
      reply_error(res, e.status(), e.what());
    }
  }

  void logs(const httplib::Request& req, httplib::Response& res) {
    auto job = job_from_path(req, res);
    if (!job) return;
    int rank = 0;
    if (req.has_param("rank")) {
      try {
        rank = std::stoi(req.get_param_value("rank"));
      } catch (...) {
        return reply_error(res, 400, "[api] 'rank' must be an integer");
      }
    }
    if (rank < 0 || rank >= job->spec.ranks())
      return reply_error(res, 404,
                         "[api] job " + std::to_string(job->id) + " has no rank " +
                             std::to_string(rank) + " (ranks 0.." +
                             std::to_string(job->spec.ranks() - 1) + ")");
    const std::string path = jobs.paths(job->id).rank_log(rank);
    const bool follow = req.has_param("follow") && req.get_param_value("follow") != "0";
    auto offset = int_param(req, "offset", 0);
    auto length = int_param(req, "length", -1);
    if (!offset || !length)
      return reply_error(res, 400, "[api] 'offset' and 'length' are byte counts");
    if (!follow) {
      if (req.has_param("tail")) {
        int n = std::atoi(req.get_param_value("tail").c_str());
        std::string text;
        for (const auto& l : tail_lines(path, std::clamp(n, 0, 10000))) text += l + "\n";
        res.set_content(text, "text/plain");
        return;
      }
      // Bytes [offset, offset + length) of the log, read piece by piece as they are sent.
      std::error_code ec;
      const auto size =
          static_cast<std::int64_t>(fs::exists(path, ec) ? fs::file_size(path, ec) : 0);
      const std::int64_t from = std::min(*offset, size);
      const std::int64_t n = *length < 0 ? size - from : std::min(*length, size - from);
      res.set_header("X-Log-Size", std::to_string(size));
      res.set_content_provider(static_cast<size_t>(n), "text/plain",
                               [path, from](size_t at, size_t want, httplib::DataSink& sink) {
                                 std::ifstream in(path, std::ios::binary);
                                 in.seekg(static_cast<std::streamoff>(from + std::int64_t(at)));
                                 std::string piece(std::min<size_t>(want, kLogPiece), '\0');
                                 in.read(piece.data(), static_cast<std::streamsize>(piece.size()));
                                 if (in.gcount() <= 0) return false;
                                 return sink.write(piece.data(), static_cast<size_t>(in.gcount()));
                               });
      return;
    }
    // A follow stream holds one connection's thread for as long as the job runs: capped per
    // client and in all, so they never take every thread (the pool grows for the rest).
    const std::string client = req.remote_addr;
    {
      std::lock_guard lock(follow_mutex);
      if (follows[client] >= kFollowsPerClient || follows_total >= kFollowsTotal)
        return reply_error(res, 429,
                           "[api] too many log streams open (" + std::to_string(follows[client]) +
                               " from " + client + ", " + std::to_string(follows_total) +
                               " in all); close some first");
      ++follows[client];
      ++follows_total;
    }
    const std::int64_t id = job->id;
    auto at = std::make_shared<std::uint64_t>(static_cast<std::uint64_t>(*offset));
    auto finished = std::make_shared<bool>(false);
    JobManager* p = &jobs;
    res.set_chunked_content_provider(
        "text/plain",
        [p, id, path, at, finished](size_t, httplib::DataSink& sink) {
          // Read what is new (a piece at a time); once the job has ended and nothing more
          // comes, finish.
          const bool ended_before_read = *finished;
          std::ifstream in(path, std::ios::binary);
          std::string chunk;
          if (in) {
            in.seekg(static_cast<std::streamoff>(*at));
            chunk.resize(kLogPiece);
            in.read(chunk.data(), kLogPiece);
            chunk.resize(static_cast<size_t>(std::max<std::streamsize>(0, in.gcount())));
          }
          if (!chunk.empty()) {
            *at += chunk.size();
            return sink.write(chunk.data(), chunk.size());
          }
          if (ended_before_read) {
            sink.done();
            return true;
          }
          auto j = p->get(id);
          if (!j || is_terminal(j->state))
            *finished = true;  // one more read, then done
          else
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
          return sink.is_writable();
        },
        [this, client](bool) {
          std::lock_guard lock(follow_mutex);
          if (--follows[client] <= 0) follows.erase(client);
          --follows_total;
        });
  }

  void routes() {
    server.Get("/api/v1/jobs", [this](const httplib::Request& req, httplib::Response& res) {
      std::optional<JobState> state;
      if (req.has_param("state")) {
        state = job_state_from_string(req.get_param_value("state"));
        if (!state)
          return reply_error(res, 400,
                             "[api] unknown state '" + req.get_param_value("state") +
                                 "' (pending, running, succeeded, failed, cancelled, lost)");
      }
      json out = json::array();
      for (const auto& j : jobs.list(state)) out.push_back(job_to_json(j));
      reply_json(res, 200, out);
    });
    server.Post("/api/v1/jobs",
                [this](const httplib::Request& req, httplib::Response& res) { submit(req, res); });
    server.Get(R"(/api/v1/jobs/([^/]+))",
               [this](const httplib::Request& req, httplib::Response& res) {
                 auto job = job_from_path(req, res);
                 if (!job) return;
                 json out = job_to_json(*job);
                 out["alerts"] = json::array();
                 for (const auto& a : jobs.alerts(job->id))
                   out["alerts"].push_back(alert_to_json(a));
                 out["job_dir"] = jobs.paths(job->id).job_dir;
                 reply_json(res, 200, out);
               });
    server.Post(R"(/api/v1/jobs/([^/]+)/cancel)",
                [this](const httplib::Request& req, httplib::Response& res) {
                  auto job = job_from_path(req, res);
                  if (!job) return;
                  auto after = jobs.cancel(job->id);
                  reply_json(res, 200, job_to_json(after ? *after : *job));
                });
    server.Get(R"(/api/v1/jobs/([^/]+)/metrics)",
               [this](const httplib::Request& req, httplib::Response& res) {
                 auto job = job_from_path(req, res);
                 if (!job) return;
                 json devices = json::array();
                 for (const auto& d : jobs.devices()) {
                   if (d.job_id != job->id) continue;
                   devices.push_back({{"index", d.device.index},
                                      {"rank", d.rank},
                                      {"utilization", d.utilization},
                                      {"memory_used", d.memory_bytes}});
                 }
                 reply_json(res, 200,
                            {{"job_id", job->id},
                             {"state", to_string(job->state)},
                             {"restart_count", job->restart_count},
                             {"devices", devices}});
               });
    server.Get(R"(/api/v1/jobs/([^/]+)/logs)",
               [this](const httplib::Request& req, httplib::Response& res) { logs(req, res); });
    server.Get("/api/v1/devices", [this](const httplib::Request&, httplib::Response& res) {
      json out = json::array();
      for (const auto& d : jobs.devices()) {
        out.push_back({{"index", d.device.index},
                       {"kind", d.device.kind},
                       {"name", d.device.name},
                       {"cores", d.device.cores},
                       {"memory_total", d.device.memory_bytes},
                       {"job_id", d.job_id},
                       {"rank", d.rank},
                       {"utilization", d.utilization},
                       {"memory_used", d.memory_bytes}});
      }
      reply_json(res, 200, out);
    });
    server.Get("/api/v1/alerts", [this](const httplib::Request& req, httplib::Response& res) {
      std::int64_t job = req.has_param("job") ? std::atoll(req.get_param_value("job").c_str()) : 0;
      json out = json::array();
      for (const auto& a : jobs.alerts(job)) out.push_back(alert_to_json(a));
      reply_json(res, 200, out);
    });
    server.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(jobs.metrics_text() + dashboard->metrics_text(), "text/plain; version=0.0.4");
    });
    server.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("ok\n", "text/plain");
    });
    dashboard = std::make_unique<Dashboard>(jobs);
    dashboard->add_routes(server);
    services = add_deployment_routes(server, jobs.options().data_dir, jobs.options().restart);
    auto not_found = [](const httplib::Request& req, httplib::Response& res) {
      reply_error(res, 404, "[api] no such endpoint: " + req.method + " " + req.path);
    };
    server.Get(".*", not_found);
    server.Post(".*", not_found);
    server.Put(".*", not_found);
    server.Delete(".*", not_found);
  }
};

ApiServer::ApiServer(JobManager& jobs, ApiServerOptions options)
    : impl_(std::make_unique<Impl>(jobs, std::move(options))) {
  impl_->routes();
}

ApiServer::~ApiServer() { stop(); }

int ApiServer::bind(const std::string& host, int port) {
  if (port == 0) {
    int p = impl_->server.bind_to_any_port(host);
    if (p < 0) throw std::runtime_error("[server] cannot bind " + host);
    return p;
  }
  if (!impl_->server.bind_to_port(host, port))
    throw std::runtime_error("[server] cannot listen on " + host + ":" + std::to_string(port) +
                             " (in use? try --port)");
  return port;
}

void ApiServer::serve() { impl_->server.listen_after_bind(); }

void ApiServer::stop() {
  if (impl_->server.is_running()) impl_->server.stop();
}

}  // namespace zenith::platform
