#include "platform/http/api_server.h"

#include <httplib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "platform/exec/executor.h"
#include "platform/exec/log_tail.h"
#include "platform/http/api_token.h"
#include "platform/http/dashboard_routes.h"
#include "platform/http/reply.h"
#include "platform/http/service_routes.h"
#include "platform/jobs/job_manager.h"
#include "platform/jobs/job_spec.h"
#include "platform/jobs/quantity.h"

namespace zenith::platform {

namespace fs = std::filesystem;
using nlohmann::json;

struct ApiServer::Impl {
  JobManager& jobs;
  std::string token;
  httplib::Server server;
  std::unique_ptr<ServiceRoutes> services;  // online services, model registry, service tokens
  std::unique_ptr<Dashboard> dashboard;     // the web UI at / and its metrics

  Impl(JobManager& p, std::string t) : jobs(p), token(std::move(t)) {}

  bool authorized(const httplib::Request& req, httplib::Response& res) {
    const std::string h = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    if (h.rfind(prefix, 0) == 0 && token_equals(h.substr(prefix.size()), token)) return true;
    reply_error(res, 401,
                h.empty() ? "[api] missing 'Authorization: Bearer <token>' (the token is in the "
                            "server's data dir, file 'token')"
                          : "[api] invalid bearer token");
    return false;
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
    if (!authorized(req, res)) return;
    json body;
    try {
      body = json::parse(req.body);
    } catch (const json::exception& e) {
      return reply_error(res, 400, std::string("[api] malformed JSON body: ") + e.what());
    }
    if (!body.is_object())
      return reply_error(res, 400,
                         "[api] the body must be a JSON object: {\"yaml\": \"...\"} or "
                         "{\"job\": {...}}");
    std::string yaml, source = "<request>", base_dir;
    if (body.contains("yaml")) {
      if (!body["yaml"].is_string()) return reply_error(res, 400, "[api] 'yaml' must be a string");
      yaml = body["yaml"].get<std::string>();
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
    if (!follow) {
      if (req.has_param("tail")) {
        int n = std::atoi(req.get_param_value("tail").c_str());
        std::string text;
        for (const auto& l : tail_lines(path, n)) text += l + "\n";
        res.set_content(text, "text/plain");
        return;
      }
      std::ifstream in(path, std::ios::binary);
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      res.set_content(text, "text/plain");
      return;
    }
    const std::int64_t id = job->id;
    auto offset = std::make_shared<std::uint64_t>(0);
    auto finished = std::make_shared<bool>(false);
    JobManager* p = &jobs;
    res.set_chunked_content_provider(
        "text/plain", [p, id, path, offset, finished](size_t, httplib::DataSink& sink) {
          // Read what is new; once the job has ended and nothing more comes, finish.
          const bool ended_before_read = *finished;
          std::ifstream in(path, std::ios::binary);
          std::string chunk;
          if (in) {
            in.seekg(static_cast<std::streamoff>(*offset));
            chunk.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
          }
          if (!chunk.empty()) {
            *offset += chunk.size();
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
        });
  }

  void routes() {
    server.set_payload_max_length(4 * 1024 * 1024);
    server.set_exception_handler(
        [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
          std::string what = "unknown error";
          try {
            std::rethrow_exception(ep);
          } catch (const std::exception& e) {
            what = e.what();
          } catch (...) {
          }
          reply_error(res, 500, "[api] internal error: " + what);
        });
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
                  if (!authorized(req, res)) return;
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
    dashboard = std::make_unique<Dashboard>(jobs, token);
    dashboard->add_routes(server);
    services = add_service_routes(server, jobs.options().data_dir,
                                  [this](auto& req, auto& res) { return authorized(req, res); });
    auto not_found = [](const httplib::Request& req, httplib::Response& res) {
      reply_error(res, 404, "[api] no such endpoint: " + req.method + " " + req.path);
    };
    server.Get(".*", not_found);
    server.Post(".*", not_found);
    server.Put(".*", not_found);
    server.Delete(".*", not_found);
  }
};

ApiServer::ApiServer(JobManager& jobs, std::string token)
    : impl_(std::make_unique<Impl>(jobs, std::move(token))) {
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
