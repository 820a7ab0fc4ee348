#include "serve/route_auth.h"

#include "platform/http/api_token.h"

namespace zenith::serve {

std::optional<std::string> bearer_secret(const httplib::Request& req) {
  const std::string h = req.get_header_value("Authorization");
  if (h.empty()) return std::nullopt;
  const std::string prefix = "Bearer ";
  return h.rfind(prefix, 0) == 0 ? h.substr(prefix.size()) : "";
}

platform::GateRefusal missing_token(const std::string& service) {
  return {401,
          "[serve] missing 'Authorization: Bearer <token>' (make one with `zenith token create "
          "--service " +
              service + "`)"};
}

bool is_platform_token(const std::string& secret, const std::string& platform_token) {
  return !platform_token.empty() && platform::token_equals(secret, platform_token);
}

std::optional<platform::GateRefusal> check_service_token(platform::TokenVerifier& tokens,
                                                         const std::string& secret,
                                                         const std::string& service) {
  switch (tokens.check(secret)) {
    case platform::TokenCheck::kOk:
      return std::nullopt;
    case platform::TokenCheck::kForbidden:
      return platform::GateRefusal{
          403, "[serve] this token is for another service, not '" + service + "'"};
    case platform::TokenCheck::kUnauthorized:
      break;
  }
  return platform::GateRefusal{401, "[serve] invalid, expired or revoked token"};
}

std::optional<platform::GateRefusal> authorize_service_request(const httplib::Request& req,
                                                               platform::TokenVerifier& tokens,
                                                               const std::string& service,
                                                               const std::string& platform_token) {
  const auto secret = bearer_secret(req);
  if (!secret) return missing_token(service);
  if (req.path == "/metrics" && is_platform_token(*secret, platform_token)) return std::nullopt;
  return check_service_token(tokens, *secret, service);
}

}  // namespace zenith::serve
