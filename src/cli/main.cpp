// `zenith <command> [args]`: dispatches to the subcommands registered in src/cli/*.cpp.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "cli/command.h"

namespace zenith::cli {

std::vector<Command>& commands() {
  static std::vector<Command> all;
  return all;
}

namespace {

void print_usage() {
  auto sorted = commands();
  std::sort(sorted.begin(), sorted.end(),
            [](const Command& a, const Command& b) { return a.name < b.name; });
  std::printf("usage: zenith <command> [options]\n\ncommands:\n");
  for (const auto& c : sorted) std::printf("  %-10s %s\n", c.name.c_str(), c.summary.c_str());
  std::printf("\n`zenith <command> --help` describes a command's options.\n");
}

}  // namespace
}  // namespace zenith::cli

int main(int argc, char** argv) {
  using namespace zenith::cli;
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "help")) {
    print_usage();
    return argc < 2 ? 2 : 0;
  }
  for (const auto& c : commands()) {
    if (c.name == argv[1]) {
      try {
        return c.run(argc - 1, argv + 1);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
      }
    }
  }
  std::fprintf(stderr, "zenith: unknown command '%s'\n\n", argv[1]);
  print_usage();
  return 2;
}
