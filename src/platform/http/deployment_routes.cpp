#include "platform/http/deployment_routes.h"

#include <httplib.h>
#include <unistd.h>

#include <climits>
#include <nlohmann/json.hpp>

#include "platform/deployments/deployment_manager.h"
#include "platform/http/reply.h"

namespace zenith::platform {

using nlohmann::json;

namespace {

json service_json(const DeploymentView& v, const std::string& cert) {
  const DeploymentRecord& r = v.record;
  return {{"name", r.name},
          {"version", r.version},
          {"state", r.state},
          {"url", r.url},
          {"port", r.bound_port},
          {"replicas", r.replicas},
          {"pid", r.pid},
          {"reason", r.reason},
          {"options", r.options.empty() ? json::object() : json::parse(r.options)},
          {"requests_per_s", v.requests_per_s},
          {"requests_total", v.requests_total},
          {"latency_ms", v.latency_ms},
          {"crashes", v.crashes},
          {"updated_at", r.updated_at},
          {"ca_cert", cert}};
}

json model_json(const ModelVersion& m) {
  return {{"name", m.name},
          {"version", m.version},
          {"package", m.package_dir},
          {"sha256", m.sha256},
          {"created_at", m.created_at}};
}

std::string self_binary() {
  if (const char* b = std::getenv("ZENITH_SERVE_BINARY"); b && *b) return b;
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, size_t(n)) : "zenith";
}

// The JSON object body, or a 400 already written.
std::optional<json> object_body(const httplib::Request& req, httplib::Response& res) {
  auto body = parse_json_body(req.body, res, "api", json::object());
  if (!body) return std::nullopt;
  if (!body->is_object()) {
    reply_error(res, 400, "[api] the body must be a JSON object");
    return std::nullopt;
  }
  return body;
}

}  // namespace

DeploymentRoutes::DeploymentRoutes(const std::string& data_dir, const RestartPolicy& restart)
    : manager_(std::make_unique<DeploymentManager>(data_dir, self_binary(), restart)) {
  manager_->start();
}

DeploymentRoutes::~DeploymentRoutes() = default;

void DeploymentRoutes::add_to(httplib::Server& server) {
  DeploymentManager& m = *manager_;
  // Runs `fn`, turning DeploymentError and bad JSON types into {"error": ...}.
  auto guarded = [](auto fn) {
    return [fn](const httplib::Request& req, httplib::Response& res) {
      try {
        fn(req, res);
      } catch (const DeploymentError& e) {
        reply_error(res, e.status(), e.what());
      } catch (const json::exception& e) {
        reply_error(res, 400, std::string("[api] bad field: ") + e.what());
      }
    };
  };
  server.Get("/api/v1/services", guarded([&m](const auto&, auto& res) {
               json out = json::array();
               for (const auto& v : m.list()) out.push_back(service_json(v, m.cert_path()));
               reply_json(res, 200, out);
             }));
  server.Post("/api/v1/services", guarded([&m](const auto& req, auto& res) {
                auto body = object_body(req, res);
                if (!body) return;
                DeployRequest d;
                d.name = body->value("name", "");
                d.package_dir = body->value("package", "");
                d.replicas = body->value("replicas", 1);
                d.port = body->value("port", 0);
                if (body->contains("options") && (*body)["options"].is_object())
                  d.options = (*body)["options"];
                auto r = m.deploy(d);
                json out = service_json({r.service, 0, 0}, m.cert_path());
                out["model"] = model_json(r.model);
                if (!r.token.empty()) out["token"] = {{"id", r.token_id}, {"secret", r.token}};
                reply_json(res, 201, out);
              }));
  server.Get(R"(/api/v1/services/([^/]+))", guarded([&m](const auto& req, auto& res) {
               auto v = m.get(req.matches[1].str());
               if (!v)
                 throw DeploymentError(404,
                                       "[api] no service named '" + req.matches[1].str() + "'");
               json out = service_json(*v, m.cert_path());
               out["versions"] = json::array();
               for (const auto& mv : m.store().model_versions(v->record.name))
                 out["versions"].push_back(model_json(mv));
               reply_json(res, 200, out);
             }));
  // An LLM service's live series for the dashboard (404 for a service that has none).
  server.Get(R"(/api/v1/services/([^/]+)/series)", guarded([&m](const auto& req, auto& res) {
               const std::string name = req.matches[1].str();
               if (!m.get(name))
                 throw DeploymentError(404, "[api] no service named '" + name + "'");
               json series = m.llm_series(name);
               if (series.is_null())
                 throw DeploymentError(404, "[api] service '" + name +
                                                "' has no LLM series (not an LLM service, or "
                                                "not sampled yet)");
               reply_json(res, 200, series);
             }));
  server.Post(
      R"(/api/v1/services/([^/]+)/undeploy)", guarded([&m](const auto& req, auto& res) {
        reply_json(res, 200, service_json({m.undeploy(req.matches[1].str()), 0, 0}, m.cert_path()));
      }));
  server.Post(R"(/api/v1/services/([^/]+)/rollback)", guarded([&m](const auto& req, auto& res) {
                auto body = object_body(req, res);
                if (!body) return;
                auto r = m.rollback(req.matches[1].str(), body->value("version", 0));
                reply_json(res, 200, service_json({r, 0, 0}, m.cert_path()));
              }));
  server.Get("/api/v1/models", guarded([&m](const auto&, auto& res) {
               json out = json::array();
               for (const auto& v : m.store().model_versions()) out.push_back(model_json(v));
               reply_json(res, 200, out);
             }));
  server.Get(R"(/api/v1/models/([^/]+))", guarded([&m](const auto& req, auto& res) {
               auto versions = m.store().model_versions(req.matches[1].str());
               if (versions.empty())
                 throw DeploymentError(404, "[api] no model named '" + req.matches[1].str() + "'");
               json out = json::array();
               for (const auto& v : versions) out.push_back(model_json(v));
               reply_json(res, 200, out);
             }));
  server.Get("/api/v1/tokens", guarded([&m](const auto& req, auto& res) {
               json out = json::array();
               const std::string service =
                   req.has_param("service") ? req.get_param_value("service") : "";
               for (const auto& t : m.store().list_tokens(service)) out.push_back(token_json(t));
               reply_json(res, 200, out);
             }));
  server.Post("/api/v1/tokens", guarded([&m](const auto& req, auto& res) {
                auto body = object_body(req, res);
                if (!body) return;
                const std::string service = body->value("service", "");
                const std::string role = body->value("role", service.empty() ? "" : "service");
                if (role != "service" && role != "admin" && role != "viewer")
                  throw DeploymentError(400,
                                        "[api] give {\"service\": NAME} for a service's token "
                                        "or {\"role\": \"admin\"|\"viewer\"} for the API");
                if (role == "service" && !m.store().get_service(service))
                  throw DeploymentError(
                      404, "[api] no service named '" + service + "' (deploy it first)");
                if (role != "service" && !service.empty())
                  throw DeploymentError(400, "[api] a token has a service or a role, not both");
                const double expires = body->value("expires_in_s", 0.0);
                if (expires < 0) throw DeploymentError(400, "[api] expires_in_s must be >= 0");
                auto [token, secret] = m.store().create_token(service, expires, role);
                json out = token_json(token);
                out["secret"] = secret;
                reply_json(res, 201, out);
              }));
  auto revoke = guarded([&m](const auto& req, auto& res) {
    std::int64_t id = 0;
    try {
      id = std::stoll(req.matches[1].str());
    } catch (...) {
    }
    if (id <= 0 || !m.store().revoke_token(id))
      throw DeploymentError(404, "[api] no token with id '" + req.matches[1].str() + "'");
    reply_json(res, 200, token_json(*m.store().get_token(id)));
  });
  server.Post(R"(/api/v1/tokens/([^/]+)/revoke)", revoke);
  server.Delete(R"(/api/v1/tokens/([^/]+))", revoke);
}

std::unique_ptr<DeploymentRoutes> add_deployment_routes(httplib::Server& server,
                                                        const std::string& data_dir,
                                                        const RestartPolicy& restart) {
  auto routes = std::make_unique<DeploymentRoutes>(data_dir, restart);
  routes->add_to(server);
  return routes;
}

}  // namespace zenith::platform
