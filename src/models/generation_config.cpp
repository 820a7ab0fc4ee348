// Decoding settings from a model directory's generation_config.json, as transformers reads them.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "zenith/llama.h"

namespace zenith::models {
namespace {

constexpr int64_t kDefaultMaxNewTokens = 128;

// transformers' GenerationConfig defaults: what a key missing from the file means.
struct FileSettings {
  bool do_sample = false;
  double temperature = 1.0;
  int64_t top_k = 50;
  double top_p = 1.0;
  double repetition_penalty = 1.0;
  int64_t max_new_tokens = kDefaultMaxNewTokens;
};

nlohmann::json read_object(const std::string& path) {
  std::ifstream in(path);
  ZENITH_CHECK(in, "[generate] cannot read ", path);
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::parse_error& e) {
    ZENITH_FAIL("[generate] ", path, ": malformed JSON: ", e.what());
  }
  ZENITH_CHECK(j.is_object(), "[generate] ", path, ": expected a JSON object, got ", j.type_name());
  return j;
}

// j[key] into `slot` when present and not null; fails naming the file and key on a wrong kind.
template <typename T>
void read_key(const nlohmann::json& j, const char* key, T& slot, const std::string& path) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return;
  bool ok = false;
  if constexpr (std::is_same_v<T, bool>)
    ok = it->is_boolean();
  else if constexpr (std::is_integral_v<T>)
    ok = it->is_number_integer();
  else
    ok = it->is_number();
  ZENITH_CHECK(ok, "[generate] ", path, ": ", key, ": expected ",
               std::is_same_v<T, bool> ? "true or false"
               : std::is_integral_v<T> ? "an integer"
                                       : "a number",
               ", got ", it->dump());
  slot = it->get<T>();
}

FileSettings read_file_settings(const std::string& model_dir) {
  FileSettings s;
  const std::string path = (std::filesystem::path(model_dir) / "generation_config.json").string();
  if (model_dir.empty() || !std::filesystem::exists(path)) return s;
  const nlohmann::json j = read_object(path);
  read_key(j, "do_sample", s.do_sample, path);
  read_key(j, "temperature", s.temperature, path);
  read_key(j, "top_k", s.top_k, path);
  read_key(j, "top_p", s.top_p, path);
  read_key(j, "repetition_penalty", s.repetition_penalty, path);
  read_key(j, "max_new_tokens", s.max_new_tokens, path);
  return s;
}

}  // namespace

GenerationConfig resolve_generation_config(const std::string& model_dir,
                                           const GenerationOverrides& given) {
  const FileSettings file = read_file_settings(model_dir);
  const bool sampling_asked =
      (given.temperature && *given.temperature > 0) || given.top_k || given.top_p;
  bool sample = given.do_sample.value_or(file.do_sample || sampling_asked);
  if (given.temperature && *given.temperature == 0) sample = false;
  GenerationConfig c;
  c.max_new_tokens = given.max_new_tokens.value_or(file.max_new_tokens);
  c.temperature = sample ? given.temperature.value_or(file.temperature) : 0.0;
  c.top_k = given.top_k.value_or(file.top_k);
  c.top_p = given.top_p.value_or(file.top_p);
  c.repetition_penalty = given.repetition_penalty.value_or(file.repetition_penalty);
  c.seed = given.seed.value_or(0);
  return c;
}

}  // namespace zenith::models
