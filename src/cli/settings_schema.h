// A subcommand's settings declared once: each setting's name, help and the member that holds it.
// One declaration gives the flags (--name VALUE, the last one wins; a bool is a switch), the keys
// of a --config YAML file (name or name_with_underscores, at the top or under `<command>:`) and
// the JSON saved in checkpoints, from which --resume restores them:
//   struct Settings { int64_t epochs = 10; double lr = 0.01; };
//   SettingsSchema schema(Settings& s) {
//     return SettingsSchema("train").add("epochs", s.epochs, "epochs").add("lr", s.lr, "rate");
//   }
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

namespace zenith::cli {

class SettingsSchema {
 public:
  using Value = std::variant<std::string*, int64_t*, double*, bool*>;
  struct Setting {
    const char* name;
    const char* help;
    Value value;  // the member it reads and writes
  };

  // `command` names the YAML section and prefixes errors: "[train] a.yaml: unknown setting 'x'".
  explicit SettingsSchema(std::string command) : command_(std::move(command)) {}

  // Declares a setting; the schema points at `value`, which must outlive it.
  template <typename T>
  SettingsSchema& add(const char* name, T& value, const char* help) {
    settings_.push_back({name, help, Value(&value)});
    return *this;
  }

  // One option per setting, showing its current value as the default.
  void add_flags(CLI::App& app) const;
  nlohmann::json to_json() const;
  // Settings saved by to_json(); keys it does not know are ignored (an older or newer run's).
  void apply_json(const nlohmann::json& j) const;
  // A --config file; unknown keys and bad values are errors naming the key (and the known ones).
  // `blocks`: top-level keys the command reads itself (finetune's parallel_config), skipped.
  void apply_yaml_file(const std::string& path, const std::vector<std::string>& blocks = {}) const;

  const std::string& command() const { return command_; }
  const std::vector<Setting>& settings() const { return settings_; }

 private:
  std::string command_;
  std::vector<Setting> settings_;
};

// The value of `--flag VALUE` or `--flag=VALUE` in argv, "" when absent: for the flags that name
// where the other settings come from (--config, --resume), read before the flags are parsed.
std::string prescan_flag(int argc, char** argv, const std::string& flag);

}  // namespace zenith::cli
