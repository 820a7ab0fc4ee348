// Reading tokenizer JSON files with errors that name the file and the key.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace zenith::text::detail {

// The file parsed; fails naming the path when it cannot be read or is not JSON.
nlohmann::json read_json(const std::string& path);

// config["type"] as a string; fails naming `where` when it is missing.
std::string type_of(const nlohmann::json& config, const std::string& where);

// config[key], which must be present and of the JSON kind `kind` ("string", "boolean",
// "number", "integer", "array", "object"); fails naming where.key (`where` is a key path such
// as "DIR/tokenizer.json: model", or a file as "DIR/tokenizer.json: ").
const nlohmann::json& member(const nlohmann::json& config, const char* key, const char* kind,
                             const std::string& where);

// config[key] as a string/bool when present and not null, else `fallback`.
std::string string_or(const nlohmann::json& config, const char* key, const std::string& fallback,
                      const std::string& where);
bool bool_or(const nlohmann::json& config, const char* key, bool fallback,
             const std::string& where);

// A {"String": s} or {"Regex": r} pattern: the string, and whether it is a regex.
std::pair<std::string, bool> pattern_of(const nlohmann::json& config, const std::string& where);

}  // namespace zenith::text::detail
