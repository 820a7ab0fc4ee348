#include "text/json_config.h"

#include "data/file_reader.h"
#include "zenith/error.h"

namespace zenith::text::detail {

nlohmann::json read_json(const std::string& path) {
  std::string text = dataset::detail::read_maybe_gzip(path, "tokenizer");
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    ZENITH_FAIL("[tokenizer] ", path, ": malformed JSON: ", e.what());
  }
}

namespace {

// where.key, or where + key when `where` is a file ("DIR/tokenizer.json: ").
std::string key_path(const std::string& where, const char* key) {
  return where.ends_with(": ") ? where + key : where + "." + key;
}

bool is_kind(const nlohmann::json& v, std::string_view kind) {
  if (kind == "string") return v.is_string();
  if (kind == "boolean") return v.is_boolean();
  if (kind == "number") return v.is_number();
  if (kind == "integer") return v.is_number_integer();
  if (kind == "array") return v.is_array();
  if (kind == "object") return v.is_object();
  return false;
}

}  // namespace

const nlohmann::json& member(const nlohmann::json& config, const char* key, const char* kind,
                             const std::string& where) {
  ZENITH_CHECK(config.is_object(), "[tokenizer] ", where, ": expected a JSON object, got ",
               config.type_name());
  auto it = config.find(key);
  ZENITH_CHECK(it != config.end(), "[tokenizer] ", key_path(where, key), " is missing");
  ZENITH_CHECK(is_kind(*it, kind), "[tokenizer] ", key_path(where, key), ": expected a ", kind,
               ", got ", it->type_name());
  return *it;
}

std::string type_of(const nlohmann::json& config, const std::string& where) {
  return member(config, "type", "string", where).get<std::string>();
}

std::string string_or(const nlohmann::json& config, const char* key, const std::string& fallback,
                      const std::string& where) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return fallback;
  return member(config, key, "string", where).get<std::string>();
}

bool bool_or(const nlohmann::json& config, const char* key, bool fallback,
             const std::string& where) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return fallback;
  return member(config, key, "boolean", where).get<bool>();
}

std::pair<std::string, bool> pattern_of(const nlohmann::json& config, const std::string& where) {
  const auto& pattern = member(config, "pattern", "object", where);
  if (pattern.contains("String"))
    return {member(pattern, "String", "string", where + ".pattern").get<std::string>(), false};
  if (pattern.contains("Regex"))
    return {member(pattern, "Regex", "string", where + ".pattern").get<std::string>(), true};
  ZENITH_FAIL("[tokenizer] ", where, ".pattern: expected {\"String\": ...} or {\"Regex\": ...}");
}

}  // namespace zenith::text::detail
