#include "serve/llm/json_schema.h"

#include <cmath>

namespace zenith::serve::llm {

namespace {

using json = nlohmann::json;

int64_t code_points(const std::string& s) {
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool has_type(const json& value, const std::string& type) {
  if (type == "object") return value.is_object();
  if (type == "array") return value.is_array();
  if (type == "string") return value.is_string();
  if (type == "boolean") return value.is_boolean();
  if (type == "null") return value.is_null();
  if (type == "number") return value.is_number();
  if (type == "integer") {
    if (value.is_number_integer()) return true;
    if (!value.is_number_float()) return false;
    double d = value.get<double>();
    return std::isfinite(d) && std::floor(d) == d;
  }
  return false;
}

class Validator {
 public:
  explicit Validator(const json& root) : root_(root) {}

  std::optional<std::string> check(const json& v, const json& s, const std::string& at,
                                   int refs = 0) {
    // refs: $ref, anyOf and oneOf steps taken without going into the value (a cycle ends here);
    // steps_: all checks, so that alternatives of alternatives cannot take exponential time.
    if (refs > 64) return fail(at, "the schema refers to itself without end");
    if (++steps_ > kMaxSteps) return fail(at, "the schema takes too long to check");
    if (s.is_boolean()) return s.get<bool>() ? none() : fail(at, "no value is allowed");
    if (!s.is_object()) return none();
    if (s.contains("$ref") && s["$ref"].is_string()) {
      std::string ref = s["$ref"].get<std::string>();
      if (ref.rfind("#", 0) != 0) return fail(at, "unresolvable $ref " + ref);
      json::json_pointer pointer(ref.substr(1));
      if (!root_.contains(pointer)) return fail(at, "unresolvable $ref " + ref);
      return check(v, root_.at(pointer), at, refs + 1);
    }
    if (s.contains("const") && v != s["const"]) return fail(at, "expected " + s["const"].dump());
    if (s.contains("enum") && s["enum"].is_array()) {
      bool found = false;
      for (const json& e : s["enum"]) found = found || e == v;
      if (!found) return fail(at, v.dump() + " is not one of " + s["enum"].dump());
    }
    if (s.contains("anyOf") && s["anyOf"].is_array()) {
      int passed = 0;
      for (const json& alt : s["anyOf"]) passed += !check(v, alt, at, refs + 1);
      if (passed == 0) return fail(at, "matches no alternative of anyOf");
    }
    if (s.contains("oneOf") && s["oneOf"].is_array()) {
      int passed = 0;
      for (const json& alt : s["oneOf"]) passed += !check(v, alt, at, refs + 1);
      if (passed != 1) return fail(at, "matches " + std::to_string(passed) + " of oneOf");
    }
    if (s.contains("type")) {
      const json& t = s["type"];
      bool ok = false;
      if (t.is_string()) ok = has_type(v, t.get<std::string>());
      for (const json& one : t.is_array() ? t : json::array())
        ok = ok || (one.is_string() && has_type(v, one.get<std::string>()));
      if (!ok) return fail(at, "expected " + t.dump() + ", got " + v.dump());
    }
    if (v.is_number()) {
      double d = v.get<double>();
      auto bound = [&](const char* key) {
        return s.contains(key) && s[key].is_number() ? std::optional<double>(s[key].get<double>())
                                                     : std::nullopt;
      };
      if (auto b = bound("minimum"); b && d < *b) return fail(at, "below minimum");
      if (auto b = bound("maximum"); b && d > *b) return fail(at, "above maximum");
      if (auto b = bound("exclusiveMinimum"); b && d <= *b)
        return fail(at, "not above exclusiveMinimum");
      if (auto b = bound("exclusiveMaximum"); b && d >= *b)
        return fail(at, "not below exclusiveMaximum");
    }
    if (v.is_object()) return check_object(v, s, at);
    if (v.is_array()) return check_array(v, s, at);
    if (v.is_string()) {
      int64_t n = code_points(v.get<std::string>());
      if (s.contains("minLength") && s["minLength"].is_number() &&
          n < s["minLength"].get<int64_t>())
        return fail(at, "shorter than minLength");
      if (s.contains("maxLength") && s["maxLength"].is_number() &&
          n > s["maxLength"].get<int64_t>())
        return fail(at, "longer than maxLength");
    }
    return none();
  }

 private:
  static std::optional<std::string> none() { return std::nullopt; }
  static std::optional<std::string> fail(const std::string& at, const std::string& what) {
    return (at.empty() ? std::string("/") : at) + ": " + what;
  }

  std::optional<std::string> check_object(const json& v, const json& s, const std::string& at) {
    const json empty = json::object();
    const json& properties =
        s.contains("properties") && s["properties"].is_object() ? s["properties"] : empty;
    if (s.contains("required") && s["required"].is_array())
      for (const json& name : s["required"])
        if (name.is_string() && !v.contains(name.get<std::string>()))
          return fail(at, "lacks required property " + name.dump());
    for (const auto& [key, value] : v.items()) {
      std::string where = at + "/" + key;
      if (properties.contains(key)) {
        if (auto e = check(value, properties[key], where)) return e;
      } else if (s.contains("additionalProperties")) {
        if (auto e = check(value, s["additionalProperties"], where))
          return fail(where, "is not allowed (additionalProperties): " + *e);
      }
    }
    return none();
  }

  std::optional<std::string> check_array(const json& v, const json& s, const std::string& at) {
    int64_t n = int64_t(v.size());
    if (s.contains("minItems") && s["minItems"].is_number() && n < s["minItems"].get<int64_t>())
      return fail(at, "fewer items than minItems");
    if (s.contains("maxItems") && s["maxItems"].is_number() && n > s["maxItems"].get<int64_t>())
      return fail(at, "more items than maxItems");
    if (s.contains("items"))
      for (size_t i = 0; i < v.size(); ++i)
        if (auto e = check(v[i], s["items"], at + "/" + std::to_string(i))) return e;
    return none();
  }

  static constexpr int64_t kMaxSteps = 1000000;
  const json& root_;
  int64_t steps_ = 0;
};

}  // namespace

std::optional<std::string> validate_json(const nlohmann::json& value,
                                         const nlohmann::json& schema) {
  return Validator(schema).check(value, schema, "");
}

}  // namespace zenith::serve::llm
