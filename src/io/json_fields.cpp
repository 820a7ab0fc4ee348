#include "io/json_fields.h"

#include "core/atomic_file.h"

namespace zenith::io {

nlohmann::json parse_json_object(const std::string& text, const char* component,
                                 const std::string& source) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    ZENITH_FAIL("[", component, "] ", source, ": invalid JSON at byte ", e.byte, ": ", e.what());
  }
  ZENITH_CHECK(j.is_object(), "[", component, "] ", source, ": expected a JSON object, got ",
               json_type_phrase(j));
  return j;
}

nlohmann::json read_json_object(const std::string& path, const char* component) {
  return parse_json_object(core::read_file(path, component), component, path);
}

std::string json_type_phrase(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null:
      return "null";
    case nlohmann::json::value_t::object:
      return "an object";
    case nlohmann::json::value_t::array:
      return "an array";
    case nlohmann::json::value_t::string:
      return value.dump() + " (a string)";
    case nlohmann::json::value_t::boolean:
      return value.dump() + " (a boolean)";
    case nlohmann::json::value_t::number_float:
      return value.dump() + " (a fraction)";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
      return value.dump() + " (an integer)";
    default:
      return "a " + std::string(value.type_name());
  }
}

bool JsonFields::has(const std::string& key) const {
  auto it = object_.find(key);
  return it != object_.end() && !it->is_null();
}

const nlohmann::json& JsonFields::at(const std::string& key) const {
  if (!has(key)) fail(key, "is missing");
  return object_.at(key);
}

void JsonFields::wrong_type(const std::string& key, const char* expected) const {
  fail(key, "must be ", expected, ", got ", json_type_phrase(object_.at(key)));
}

int64_t JsonFields::integer(const std::string& key) const {
  const auto& v = at(key);
  if (!v.is_number_integer()) wrong_type(key, "an integer");
  return v.get<int64_t>();
}

int64_t JsonFields::integer(const std::string& key, int64_t fallback) const {
  return has(key) ? integer(key) : fallback;
}

std::optional<int64_t> JsonFields::optional_integer(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return integer(key);
}

double JsonFields::number(const std::string& key) const {
  const auto& v = at(key);
  if (!v.is_number()) wrong_type(key, "a number");
  return v.get<double>();
}

double JsonFields::number(const std::string& key, double fallback) const {
  return has(key) ? number(key) : fallback;
}

bool JsonFields::boolean(const std::string& key, bool fallback) const {
  if (!has(key)) return fallback;
  const auto& v = object_.at(key);
  if (!v.is_boolean()) wrong_type(key, "true or false");
  return v.get<bool>();
}

std::string JsonFields::string(const std::string& key) const {
  const auto& v = at(key);
  if (!v.is_string()) wrong_type(key, "a string");
  return v.get<std::string>();
}

std::string JsonFields::string(const std::string& key, const std::string& fallback) const {
  return has(key) ? string(key) : fallback;
}

std::vector<int64_t> JsonFields::integers(const std::string& key) const {
  if (!has(key)) return {};
  const auto& v = object_.at(key);
  if (v.is_number_integer()) return {v.get<int64_t>()};
  if (!v.is_array()) wrong_type(key, "an integer or a list of integers");
  std::vector<int64_t> out;
  for (const auto& e : v) {
    if (!e.is_number_integer()) wrong_type(key, "an integer or a list of integers");
    out.push_back(e.get<int64_t>());
  }
  return out;
}

std::vector<std::string> JsonFields::strings(const std::string& key) const {
  const auto& v = at(key);
  if (!v.is_array()) wrong_type(key, "a list of strings");
  std::vector<std::string> out;
  for (const auto& e : v) {
    if (!e.is_string()) wrong_type(key, "a list of strings");
    out.push_back(e.get<std::string>());
  }
  return out;
}

}  // namespace zenith::io
