// Typed reads of a JSON object's keys (config.json, adapter_config.json, index files) whose
// errors name the component, the file and the key: "[llama_config] dir/config.json: key
// 'hidden_size' must be an integer, got "4096" (a string)". A key holding null counts as absent,
// as None does in the Python that writes these files.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "zenith/error.h"

namespace zenith::io {

// The JSON object in `text` read from `source`; errors name `component`, the source and where
// parsing failed.
nlohmann::json parse_json_object(const std::string& text, const char* component,
                                 const std::string& source);
// The JSON object in file `path`.
nlohmann::json read_json_object(const std::string& path, const char* component);
// "a string", "an array", ... for error messages.
std::string json_type_phrase(const nlohmann::json& value);

class JsonFields {
 public:
  // `prefix` names a nested object in errors: "rope_scaling." gives key 'rope_scaling.factor'.
  JsonFields(const nlohmann::json& object, std::string component, std::string source,
             std::string prefix = "")
      : object_(object),
        component_(std::move(component)),
        source_(std::move(source)),
        prefix_(std::move(prefix)) {}

  bool has(const std::string& key) const;                  // present and not null
  const nlohmann::json& at(const std::string& key) const;  // must be present

  int64_t integer(const std::string& key) const;  // required
  int64_t integer(const std::string& key, int64_t fallback) const;
  std::optional<int64_t> optional_integer(const std::string& key) const;
  double number(const std::string& key, double fallback) const;  // integers accepted
  double number(const std::string& key) const;
  bool boolean(const std::string& key, bool fallback) const;
  std::string string(const std::string& key, const std::string& fallback) const;
  std::string string(const std::string& key) const;
  // An integer or a list of integers, as eos_token_id may be.
  std::vector<int64_t> integers(const std::string& key) const;
  // A list of strings.
  std::vector<std::string> strings(const std::string& key) const;

  // Throws "[component] source: key 'key' <what...>".
  template <typename... Args>
  [[noreturn]] void fail(const std::string& key, const Args&... what) const {
    ZENITH_FAIL("[", component_, "] ", source_, ": key '", prefix_, key, "' ", what...);
  }
  const std::string& source() const { return source_; }
  const std::string& component() const { return component_; }

 private:
  [[noreturn]] void wrong_type(const std::string& key, const char* expected) const;
  const nlohmann::json& object_;
  std::string component_;
  std::string source_;
  std::string prefix_;
};

}  // namespace zenith::io
