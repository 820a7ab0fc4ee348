// The platform API's service, model registry and token routes (see deployment_manager.h):
//
//   GET  /api/v1/services                  list: name, version, url, state, requests/s,
//                                          crashes (quick exits in a row)
//   POST /api/v1/services                  deploy {"name", "package", "replicas", "port",
//                                          "options": {...}}; 201 with the service, the model
//                                          version and (first deploy) a token
//   GET  /api/v1/services/{name}
//   POST /api/v1/services/{name}/undeploy
//   POST /api/v1/services/{name}/rollback  {"version": N} or {} for the previous version
//   GET  /api/v1/models[/{name}]           registered package versions
//   GET  /api/v1/tokens[?service=NAME]     metadata only; secrets are never stored
//   POST /api/v1/tokens                    {"service", "expires_in_s"} for a service, or
//                                          {"role": "admin"|"viewer", "expires_in_s"} for the
//                                          platform API; 201 with the secret, once
//   POST /api/v1/tokens/{id}/revoke        (also DELETE /api/v1/tokens/{id})
// The API server's gate checks tokens and roles before these run (api_server.h).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "platform/jobs/backoff.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace zenith::platform {

class DeploymentManager;

class DeploymentRoutes {
 public:
  DeploymentRoutes(const std::string& data_dir, const RestartPolicy& restart);
  ~DeploymentRoutes();
  void add_to(httplib::Server& server);
  DeploymentManager& manager() { return *manager_; }

 private:
  std::unique_ptr<DeploymentManager> manager_;
};

// Starts the services of `data_dir` and adds their routes; call before any catch-all route.
// The services run `zenith serve` with this program's binary ($ZENITH_SERVE_BINARY overrides).
std::unique_ptr<DeploymentRoutes> add_deployment_routes(httplib::Server& server,
                                                        const std::string& data_dir,
                                                        const RestartPolicy& restart = {});

}  // namespace zenith::platform
