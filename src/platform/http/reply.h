// The one way zenith's HTTP servers answer with JSON: the jobs API, the dashboard, the service
// routes and the inference server (src/serve). Compact JSON and a newline, never cached, and
// never a throw on content: bytes that are not UTF-8 in a string (a failing job's output quoted
// in an alert, a request's bytes in a message) become U+FFFD, where nlohmann::json's dump()
// would throw type_error.316 and the server answer 500.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
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

// The deepest nesting of [ and { in `text`: JSON strings skipped, or (skip_strings false, for
// YAML, whose quoting is looser) every bracket counted. Deeply nested input is refused before a
// recursive parser, copy or dump sees it (100k levels overflow a thread's stack).
std::size_t nesting_depth(const std::string& text, bool skip_strings = true);
constexpr std::size_t kMaxJsonDepth = 64;

// `body` parsed as JSON, or nullopt with a 400 already answered ("[component] malformed JSON
// body: ..." or nested too deep). An empty body is `empty_as`, when given.
std::optional<nlohmann::json> parse_json_body(
    const std::string& body, httplib::Response& res, const std::string& component,
    const std::optional<nlohmann::json>& empty_as = std::nullopt);

}  // namespace zenith::platform
