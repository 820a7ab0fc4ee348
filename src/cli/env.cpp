// `zenith env`: every environment variable zenith knows (src/cli/env_vars.cpp) with its value
// here; `--markdown` prints the table docs/environment.md is made from.
#include <cstdio>
#include <cstdlib>

#include "cli/args.h"
#include "cli/command.h"
#include "cli/env_vars.h"

namespace zenith::cli {
namespace {

int run_env(int argc, char** argv) {
  CLI::App app{"List zenith's environment variables with their current values", "zenith env"};
  bool markdown = false;
  app.add_flag("--markdown", markdown, "print the table of docs/environment.md instead");
  if (auto exit = parse_args(app, argc, argv)) return *exit;
  if (markdown) {
    std::fputs(env_markdown().c_str(), stdout);
    return 0;
  }
  bool first = true;
  EnvGroup group{};
  for (const EnvVar& v : env_vars()) {
    if (first || v.group != group)
      std::printf("%s%.*s:\n", first ? "" : "\n", int(env_group_title(v.group).size()),
                  env_group_title(v.group).data());
    first = false;
    group = v.group;
    const std::string name(v.name);
    const char* value = std::getenv(name.c_str());
    if (value)
      std::printf("  %s=%s\n", name.c_str(), value);
    else
      std::printf("  %s unset (default: %.*s)\n", name.c_str(), int(v.default_value.size()),
                  v.default_value.data());
  }
  std::printf("\n`zenith env --markdown` describes each one (docs/environment.md).\n");
  return 0;
}

}  // namespace
}  // namespace zenith::cli

ZENITH_COMMAND("env", "List zenith's environment variables and their values (--markdown: docs)",
               zenith::cli::run_env);
