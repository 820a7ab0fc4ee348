// SettingsSchema: flags, YAML and JSON of a subcommand's settings from one declaration.
#include "cli/settings_schema.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <type_traits>

#include "zenith/error.h"

namespace zenith::cli {
namespace {

std::string normalise_key(std::string key) {
  for (auto& c : key)
    if (c == '_') c = '-';
  return key;
}

}  // namespace

void SettingsSchema::add_flags(CLI::App& app) const {
  for (const auto& setting : settings_)
    std::visit(
        [&](auto* value) {
          const std::string flag = std::string("--") + setting.name;
          if constexpr (std::is_same_v<std::decay_t<decltype(*value)>, bool>)
            app.add_flag(flag, *value, setting.help);
          else
            app.add_option(flag, *value, setting.help)
                ->capture_default_str()
                ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // the last flag wins
        },
        setting.value);
}

nlohmann::json SettingsSchema::to_json() const {
  nlohmann::json j;
  for (const auto& setting : settings_)
    std::visit([&](auto* value) { j[setting.name] = *value; }, setting.value);
  return j;
}

void SettingsSchema::apply_json(const nlohmann::json& j) const {
  for (const auto& setting : settings_)
    if (j.contains(setting.name))
      std::visit(
          [&](auto* value) { *value = j[setting.name].get<std::decay_t<decltype(*value)>>(); },
          setting.value);
}

void SettingsSchema::apply_yaml_file(const std::string& path,
                                     const std::vector<std::string>& blocks) const {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    ZENITH_FAIL("[", command_, "] ", path, ": ", e.what());
  }
  if (root.IsMap() && root[command_]) root = root[command_];  // (indexing a list makes it a map)
  ZENITH_CHECK(root.IsMap(), "[", command_, "] ", path, ": expected a map of settings");
  std::string known;
  for (const auto& setting : settings_)
    known += (known.empty() ? "" : ", ") + std::string(setting.name);
  for (const auto& item : root) {
    const std::string key = normalise_key(item.first.as<std::string>());
    if (std::find(blocks.begin(), blocks.end(), item.first.as<std::string>()) != blocks.end())
      continue;
    const Setting* setting = nullptr;
    for (const auto& s : settings_)
      if (key == s.name) setting = &s;
    ZENITH_CHECK(setting, "[", command_, "] ", path, ": unknown setting '", key,
                 "' (known: ", known, ")");
    std::visit(
        [&](auto* value) {
          try {
            *value = item.second.as<std::decay_t<decltype(*value)>>();
          } catch (const YAML::Exception&) {
            ZENITH_FAIL("[", command_, "] ", path, ": '", key, "' has a bad value (line ",
                        item.second.Mark().line + 1, ")");
          }
        },
        setting->value);
  }
}

std::string prescan_flag(int argc, char** argv, const std::string& flag) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == flag && i + 1 < argc) return argv[i + 1];
    if (a.rfind(flag + "=", 0) == 0) return a.substr(flag.size() + 1);
  }
  return "";
}

}  // namespace zenith::cli
