// The token gate both services run before a request's body is read: the KServe service
// (inference_server.cpp) and the OpenAI-compatible LLM service (llm/http_server.cpp). A request
// carries `Authorization: Bearer <token>`; a token of the service passes, and on /metrics so
// does the platform's own token (DATA/token), with which its monitor samples the service.
#pragma once

#include <httplib.h>

#include <optional>
#include <string>

#include "platform/deployments/deployment_store.h"
#include "platform/http/http_guard.h"

namespace zenith::serve {

// The secret of `Authorization: Bearer <secret>`: nullopt when the header is missing (or empty), ""
// when it is not a bearer token.
std::optional<std::string> bearer_secret(const httplib::Request& req);

// The 401 for a request without a token, naming the command that makes one for `service`.
platform::GateRefusal missing_token(const std::string& service);

// Whether `secret` is the platform's own token (never when `platform_token` is "").
bool is_platform_token(const std::string& secret, const std::string& platform_token);

// nullopt for a token of `service`; 403 for another service's token; 401 for an unknown,
// expired or revoked one.
std::optional<platform::GateRefusal> check_service_token(platform::TokenVerifier& tokens,
                                                         const std::string& secret,
                                                         const std::string& service);

// The whole gate for a route that needs a token of `service` (and /metrics, which the platform's
// token also opens): missing_token(), then is_platform_token(), then check_service_token().
std::optional<platform::GateRefusal> authorize_service_request(const httplib::Request& req,
                                                               platform::TokenVerifier& tokens,
                                                               const std::string& service,
                                                               const std::string& platform_token);

}  // namespace zenith::serve
