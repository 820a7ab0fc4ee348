// Hugging Face model weights: one `model.safetensors`, or shards named
// model-00001-of-00003.safetensors with `model.safetensors.index.json` mapping each tensor to its
// shard, as transformers' save_pretrained writes them.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "core/atomic_file.h"
#include "io/json_fields.h"
#include "zenith/hf.h"

namespace zenith::io {

namespace fs = std::filesystem;

namespace {

constexpr const char* kComponent = "hf";

// "a.10.b" after "a.2.b": digit runs compare as numbers, so layers keep their model order.
bool natural_less(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(uint8_t(a[i])) && std::isdigit(uint8_t(b[j]))) {
      size_t i2 = i, j2 = j;
      while (i2 < a.size() && std::isdigit(uint8_t(a[i2]))) ++i2;
      while (j2 < b.size() && std::isdigit(uint8_t(b[j2]))) ++j2;
      std::string x = a.substr(i, i2 - i), y = b.substr(j, j2 - j);
      x.erase(0, std::min(x.find_first_not_of('0'), x.size()));
      y.erase(0, std::min(y.find_first_not_of('0'), y.size()));
      if (x.size() != y.size()) return x.size() < y.size();
      if (x != y) return x < y;
      i = i2;
      j = j2;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  if ((a.size() - i) != (b.size() - j)) return a.size() - i < b.size() - j;
  return a < b;
}

std::string shard_name(size_t index, size_t count) {
  char name[64];
  std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", index + 1, count);
  return name;
}

bool is_shard_name(const std::string& name) {
  static const std::regex pattern(R"(model-\d{5}-of-\d{5}\.safetensors)");
  return std::regex_match(name, pattern);
}

// The shard files an index names (empty when there is no index or it cannot be read).
std::set<std::string> indexed_files(const fs::path& index) {
  std::set<std::string> files;
  if (!fs::exists(index)) return files;
  try {
    auto j = read_json_object(index.string(), kComponent);
    for (const auto& [name, file] : j.at("weight_map").items())
      if (file.is_string()) files.insert(file.get<std::string>());
  } catch (const std::exception&) {
    files.insert("");  // unreadable: treat it as naming everything
  }
  return files;
}

void check_shard_file_name(const JsonFields& fields, const std::string& tensor,
                           const nlohmann::json& file) {
  if (!file.is_string())
    fields.fail("weight_map", "entry '", tensor, "' must be a file name, got ",
                json_type_phrase(file));
  std::string f = file.get<std::string>();
  if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..")
    fields.fail("weight_map", "entry '", tensor, "' names '", f,
                "', not a file in the model directory");
}

}  // namespace

std::vector<TensorInfo> list_hf_state(const std::string& dir) {
  const fs::path d(dir);
  ZENITH_CHECK(fs::is_directory(d), "[hf] ", dir, ": not a directory");
  const fs::path single = d / kHfWeightsFile;
  const fs::path index = d / kHfIndexFile;
  if (fs::exists(single)) return list_safetensors(single.string());
  if (!fs::exists(index)) {
    ZENITH_CHECK(
        !fs::exists(d / "pytorch_model.bin") && !fs::exists(d / "pytorch_model.bin.index.json"),
        "[hf] ", dir,
        ": holds PyTorch pickle weights (pytorch_model.bin); zenith reads safetensors "
        "(save the model with safe_serialization=True)");
    ZENITH_FAIL("[hf] ", dir, ": no ", kHfWeightsFile, " or ", kHfIndexFile);
  }

  const std::string index_path = index.string();
  nlohmann::json j = read_json_object(index_path, kComponent);
  JsonFields fields(j, kComponent, index_path);
  const nlohmann::json& weight_map = fields.at("weight_map");
  if (!weight_map.is_object())
    fields.fail("weight_map", "must be an object of tensor name to shard file, got ",
                json_type_phrase(weight_map));
  if (fields.has("metadata") && !fields.at("metadata").is_object())
    fields.fail("metadata", "must be an object, got ", json_type_phrase(fields.at("metadata")));

  std::map<std::string, std::vector<std::string>> by_file;  // shard -> tensors the index puts there
  for (const auto& [tensor, file] : weight_map.items()) {
    check_shard_file_name(fields, tensor, file);
    by_file[file.get<std::string>()].push_back(tensor);
  }
  std::vector<TensorInfo> out;
  for (const auto& [file, tensors] : by_file) {
    const fs::path shard = d / file;
    ZENITH_CHECK(fs::is_regular_file(shard), "[hf] ", index_path, ": shard ", file, " (",
                 tensors.size(), " tensors, e.g. '", tensors.front(), "') is missing from ", dir);
    std::vector<TensorInfo> infos = list_safetensors(shard.string());
    std::set<std::string> held;
    for (const auto& info : infos) {
      auto it = weight_map.find(info.name);
      ZENITH_CHECK(it != weight_map.end(), "[hf] ", shard.string(), ": holds tensor '", info.name,
                   "', which ", kHfIndexFile, " does not list");
      ZENITH_CHECK(*it == file, "[hf] ", shard.string(), ": holds tensor '", info.name, "', which ",
                   kHfIndexFile, " maps to ", it->get<std::string>());
      held.insert(info.name);
    }
    for (const auto& tensor : tensors)
      ZENITH_CHECK(held.count(tensor), "[hf] ", index_path, ": maps tensor '", tensor, "' to ",
                   file, ", which does not hold it");
    out.insert(out.end(), infos.begin(), infos.end());
  }
  std::sort(out.begin(), out.end(),
            [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
  return out;
}

std::map<std::string, Tensor> load_hf_state(const std::string& dir) {
  return read_tensors(list_hf_state(dir));
}

void save_hf_state(const std::string& dir, const std::map<std::string, Tensor>& tensors,
                   uint64_t max_shard_bytes) {
  ZENITH_CHECK(max_shard_bytes > 0, "[hf] ", dir, ": max_shard_bytes must be positive");
  ZENITH_CHECK(!tensors.empty(), "[hf] ", dir, ": no tensors to save");
  const fs::path d(dir);
  fs::create_directories(d);

  // Shards filled in model order: a new shard starts when the next tensor would overflow this one
  // (a tensor larger than the limit gets a shard of its own), as huggingface_hub splits them.
  std::vector<const std::pair<const std::string, Tensor>*> order;
  for (const auto& entry : tensors) order.push_back(&entry);
  std::sort(order.begin(), order.end(),
            [](const auto* a, const auto* b) { return natural_less(a->first, b->first); });
  std::vector<std::map<std::string, Tensor>> shards(1);
  uint64_t shard_bytes = 0, total_bytes = 0;
  for (const auto* entry : order) {
    uint64_t n = entry->second.nbytes();
    if (!shards.back().empty() && shard_bytes + n > max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().insert(*entry);
    shard_bytes += n;
    total_bytes += n;
  }

  const Metadata metadata{{"format", "pt"}};
  const fs::path index = d / kHfIndexFile;
  std::set<std::string> keep;
  if (shards.size() == 1) {
    save_safetensors((d / kHfWeightsFile).string(), shards[0], metadata);
    keep.insert(kHfWeightsFile);
  } else {
    // An old index naming a file about to be overwritten goes first: a crash in between leaves a
    // directory without an index (a clear error on load), never one mixing two saves.
    std::set<std::string> old_files = indexed_files(index);
    for (size_t i = 0; i < shards.size(); ++i)
      if (old_files.count(shard_name(i, shards.size())) || old_files.count("")) {
        fs::remove(index);
        core::fsync_directory(d.string());
        break;
      }
    nlohmann::json weight_map = nlohmann::json::object();
    for (size_t i = 0; i < shards.size(); ++i) {
      std::string name = shard_name(i, shards.size());
      save_safetensors((d / name).string(), shards[i], metadata);
      for (const auto& [tensor, t] : shards[i]) weight_map[tensor] = name;
      keep.insert(name);
    }
    nlohmann::json j = {{"metadata", {{"total_size", total_bytes}}}, {"weight_map", weight_map}};
    core::write_file_atomic(index.string(), j.dump(2) + "\n");
    keep.insert(kHfIndexFile);
  }
  // What an earlier save left and this one does not use; a leftover model.safetensors would
  // shadow the new index.
  std::vector<fs::path> stale;
  for (const auto& entry : fs::directory_iterator(d)) {
    std::string name = entry.path().filename().string();
    bool weights = name == kHfWeightsFile || name == kHfIndexFile || is_shard_name(name);
    if (weights && !keep.count(name)) stale.push_back(entry.path());
  }
  for (const auto& path : stale) fs::remove(path);
  core::fsync_directory(d.string());
}

}  // namespace zenith::io
