#include "serve/llm_package.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "core/atomic_file.h"
#include "platform/deployments/deployment_store.h"
#include "zenith/error.h"
#include "zenith/gguf.h"

namespace zenith::serve {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kFormat = "zenith-llm-package";
constexpr const char* kGgufFile = "model.gguf";  // a package made from a GGUF file

// The files of an HF model directory a service needs (no checkpoints, logs or optimizer state).
bool model_file(const std::string& name) {
  static const std::vector<std::string> names = {
      "config.json",       "generation_config.json",      "tokenizer.json",
      "tokenizer.model",   "tokenizer_config.json",       "special_tokens_map.json",
      "added_tokens.json", "model.safetensors.index.json"};
  if (std::find(names.begin(), names.end(), name) != names.end()) return true;
  return name.size() > 12 && name.compare(name.size() - 12, 12, ".safetensors") == 0;
}

std::vector<std::string> files_of(const std::string& dir, bool adapter) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    const std::string name = e.path().filename().string();
    if (adapter ? (name == "adapter_config.json" || name == "adapter_model.safetensors")
                : model_file(name))
      out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

bool is_hf_model_dir(const std::string& dir) {
  return fs::is_regular_file(dir + "/config.json") && !fs::exists(dir + "/package.json");
}

bool is_llm_package(const std::string& dir) {
  std::ifstream in(dir + "/package.json");
  if (!in) return false;
  const json j = json::parse(in, nullptr, false);
  return j.is_object() && j.value("format", "") == kFormat;
}

std::pair<std::string, std::string> parse_adapter_flag(const std::string& text) {
  static const std::regex name_re("[A-Za-z0-9][A-Za-z0-9._-]{0,63}");
  const auto eq = text.find('=');
  ZENITH_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < text.size(), "[serve] --adapter '",
               text, "': write NAME=DIR (a PEFT adapter directory)");
  const std::string name = text.substr(0, eq), dir = text.substr(eq + 1);
  ZENITH_CHECK(std::regex_match(name, name_re), "[serve] --adapter '", text, "': the name '", name,
               "' must be letters, digits, '.', '_' or '-' (at most 64)");
  ZENITH_CHECK(fs::is_regular_file(dir + "/adapter_config.json") ||
                   (fs::is_regular_file(dir) && models::is_gguf_file(dir)),
               "[serve] --adapter '", text, "': ", dir,
               " has no adapter_config.json (neither a PEFT adapter directory nor a GGUF adapter "
               "file)");
  return {name, dir};
}

std::string resolve_llm_model(const std::string& dir,
                              std::vector<std::pair<std::string, std::string>>& adapters) {
  if (fs::is_regular_file(dir + "/config.json") ||
      !fs::is_regular_file(dir + "/adapter_config.json"))
    return dir;
  std::ifstream in(dir + "/adapter_config.json");
  const json config = json::parse(in, nullptr, false);
  const std::string base =
      config.is_object() ? config.value("base_model_name_or_path", json("")).get<std::string>()
                         : "";
  ZENITH_CHECK(!base.empty(), "[serve] ", dir,
               " is a PEFT adapter without base_model_name_or_path: give the base model as "
               "--model and the adapter as --adapter NAME=",
               dir);
  std::string found;
  for (const std::string& candidate : {base, dir + "/" + base})
    if (found.empty() && fs::is_regular_file(candidate + "/config.json")) found = candidate;
  ZENITH_CHECK(!found.empty(), "[serve] ", dir, " is a PEFT adapter of '", base,
               "', which is not a model directory here: give the base model as --model and the "
               "adapter as --adapter NAME=",
               dir);
  std::string name = fs::path(dir).lexically_normal().filename().string();
  if (name.empty()) name = fs::path(dir).lexically_normal().parent_path().filename().string();
  adapters.insert(adapters.begin(), {name, dir});
  return found;
}

LlmPackageSpec write_llm_package(const std::string& model_dir,
                                 const std::vector<std::pair<std::string, std::string>>& adapters,
                                 const std::string& dir, const std::string& name) {
  const bool gguf = fs::is_regular_file(model_dir) && models::is_gguf_file(model_dir);
  ZENITH_CHECK(gguf || is_hf_model_dir(model_dir), "[package] ", model_dir,
               " is neither a Hugging Face model directory (config.json) nor a GGUF file");
  ZENITH_CHECK(!fs::exists(dir), "[package] ", dir, " already exists");
  LlmPackageSpec spec;
  spec.name = name;
  spec.source = fs::absolute(model_dir).lexically_normal().string();
  fs::create_directories(dir);
  if (gguf) {  // weights and vocabulary in one file
    core::copy_file_atomic(model_dir, dir + "/" + kGgufFile);
    spec.files.push_back(kGgufFile);
  }
  for (const auto& f : gguf ? std::vector<std::string>{} : files_of(model_dir, false)) {
    core::copy_file_atomic(model_dir + "/" + f, dir + "/" + f);
    spec.files.push_back(f);
  }
  ZENITH_CHECK(gguf || std::count_if(spec.files.begin(), spec.files.end(),
                                     [](const std::string& f) {
                                       return f.size() > 12 &&
                                              f.compare(f.size() - 12, 12, ".safetensors") == 0;
                                     }) > 0,
               "[package] ", model_dir, " has no .safetensors weights");
  for (const auto& [adapter, adapter_dir] : adapters) {
    if (fs::is_regular_file(adapter_dir) && models::is_gguf_file(adapter_dir)) {
      const std::string rel = "adapters/" + adapter + ".gguf";  // a GGUF adapter: one file
      fs::create_directories(dir + "/adapters");
      core::copy_file_atomic(adapter_dir, dir + "/" + rel);
      spec.files.push_back(rel);
      spec.adapters.emplace_back(adapter, rel);
      continue;
    }
    const std::string rel = "adapters/" + adapter;
    fs::create_directories(dir + "/" + rel);
    for (const auto& f : files_of(adapter_dir, true)) {
      core::copy_file_atomic(adapter_dir + "/" + f, dir + "/" + rel + "/" + f);
      spec.files.push_back(rel + "/" + f);
    }
    spec.adapters.emplace_back(adapter, rel);
  }
  spec.created_at =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  json adapters_json = json::object();
  for (const auto& [n, rel] : spec.adapters) adapters_json[n] = rel;
  json manifest = {{"format", kFormat},
                   {"format_version", 1},
                   {"name", spec.name},
                   {"source", spec.source},
                   {"files", spec.files},
                   {"adapters", adapters_json},
                   {"created_at", spec.created_at}};
  core::write_file_atomic(dir + "/package.json", manifest.dump(2) + "\n");
  spec.sha256 = platform::package_content_hash(dir);
  manifest["sha256"] = spec.sha256;
  core::write_file_atomic(dir + "/package.json", manifest.dump(2) + "\n");
  return spec;
}

std::string llm_package_model(const std::string& dir) {
  const std::string gguf = dir + "/" + kGgufFile;
  return fs::is_regular_file(gguf) && !fs::exists(dir + "/config.json") ? gguf : dir;
}

LlmPackageSpec read_llm_package(const std::string& dir) {
  std::ifstream in(dir + "/package.json");
  ZENITH_CHECK(bool(in), "[package] ", dir, " has no package.json");
  const json j = json::parse(in, nullptr, false);
  ZENITH_CHECK(j.is_object() && j.value("format", "") == kFormat, "[package] ", dir,
               "/package.json is not an LLM package's");
  LlmPackageSpec spec;
  spec.name = j.value("name", "");
  spec.source = j.value("source", "");
  spec.files = platform::package_files(j);
  if (j.contains("adapters") && j["adapters"].is_object())
    for (const auto& [n, rel] : j["adapters"].items()) {
      const bool under = rel == "adapters/" + n || rel == "adapters/" + n + ".gguf";
      ZENITH_CHECK(under && n.find('/') == std::string::npos && n != ".." && n != ".", "[package] ",
                   dir, "/package.json: adapter '", n, "' is not under adapters/");
      spec.adapters.emplace_back(n, rel);
    }
  spec.sha256 = j.value("sha256", "");
  spec.created_at = j.value("created_at", 0.0);
  const std::string hash = platform::package_content_hash(dir);
  ZENITH_CHECK(hash == spec.sha256, "[package] ", dir,
               ": content hash mismatch (the package was modified after it was made)");
  return spec;
}

}  // namespace zenith::serve
