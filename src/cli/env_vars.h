// Every environment variable zenith reads or sets, declared once with its default and meaning.
// `zenith env` lists them with their current values, `zenith env --markdown` writes
// docs/environment.md, and tests/cli/env_vars_test.cpp fails when a ZENITH_ name the sources
// use is missing here or the docs differ from this table.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace zenith::cli {

enum class EnvGroup {
  settings,     // read by `zenith`, the Python module or their ranks; a user sets them
  tuning,       // kernel, graph and isolation switches, for measuring and debugging
  platform,     // the platform sets them for each rank of a job (a user may set them by hand)
  development,  // read by the build, install and test scripts, not by zenith itself
};

struct EnvVar {
  std::string_view name;
  EnvGroup group;
  std::string_view default_value;  // what applies while it is unset
  std::string_view meaning;
};

std::span<const EnvVar> env_vars();
std::string_view env_group_title(EnvGroup group);

// ZENITH_ names in the sources that are not environment variables (compile definitions, CMake
// options and variables), each with why: the env test skips exactly these.
struct NotEnvVar {
  std::string_view name;
  std::string_view why;
};
std::span<const NotEnvVar> not_env_vars();

// The table as docs/environment.md.
std::string env_markdown();

}  // namespace zenith::cli
