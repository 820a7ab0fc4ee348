#include "platform/http/reply.h"

#include <httplib.h>

#include <algorithm>

namespace zenith::platform {

std::string json_text(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void reply_json(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_header("Cache-Control", "no-store");
  res.set_content(json_text(body) + "\n", "application/json");
}

void reply_error(httplib::Response& res, int status, const std::string& message) {
  reply_json(res, status, {{"error", message}});
}

}  // namespace zenith::platform

namespace zenith::platform {

std::size_t nesting_depth(const std::string& text, bool skip_strings) {
  std::size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"' && skip_strings)
      in_string = true;
    else if (c == '[' || c == '{')
      deepest = std::max(deepest, ++depth);
    else if ((c == ']' || c == '}') && depth > 0)
      --depth;
  }
  return deepest;
}

std::optional<nlohmann::json> parse_json_body(const std::string& body, httplib::Response& res,
                                              const std::string& component,
                                              const std::optional<nlohmann::json>& empty_as) {
  if (body.empty() && empty_as) return empty_as;
  if (nesting_depth(body) > kMaxJsonDepth) {
    reply_error(res, 400,
                "[" + component + "] the JSON body is nested deeper than " +
                    std::to_string(kMaxJsonDepth) + " levels");
    return std::nullopt;
  }
  try {
    return nlohmann::json::parse(body);
  } catch (const nlohmann::json::exception& e) {
    reply_error(res, 400, "[" + component + "] malformed JSON body: " + e.what());
    return std::nullopt;
  }
}

}  // namespace zenith::platform
