// The one way zenith's HTTP servers answer with JSON: the jobs API, the dashboard, the service
// routes and the inference server (src/serve). Compact JSON and a newline, never cached, and
// never a throw on content: bytes that are not UTF-8 in a string (a failing job's output quoted
// in an alert, a request's bytes in a message) become U+FFFD, where nlohmann::json's dump()
// would throw type_error.316 and the server answer 500.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace httplib {
struct Response;
}

namespace zenith::platform {

// `value` as compact JSON text; invalid UTF-8 in its strings becomes U+FFFD.
std::string json_text(const nlohmann::json& value);

// Answers `status` with `body` (application/json, Cache-Control: no-store).
void reply_json(httplib::Response& res, int status, const nlohmann::json& body);

// Answers `status` with {"error": message}; messages start with their component, "[api] ...".
void reply_error(httplib::Response& res, int status, const std::string& message);

}  // namespace zenith::platform
