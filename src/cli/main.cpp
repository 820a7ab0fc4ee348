// `zenith <command> [args]`: dispatches to the subcommands registered in src/cli/*.cpp.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <set>
#include <string>

#include "cli/args.h"
#include "cli/command.h"
#include "cli/omp_defaults.h"
#include "zenith_version.h"  // generated at build time (cmake/version_header.cmake)

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
  std::printf("\n`zenith <command> --help` describes a command's options; `zenith --version`.\n");
}

// "zenith 0.1.0 (commit 0123abcd4567)"; without the commit outside a git checkout.
int print_version(int, char**) {
  std::printf("zenith %s", kVersion);
  if (*kGitCommit) std::printf(" (commit %s)", kGitCommit);
  std::printf("\n");
  return 0;
}

// Commands that talk to the server or print settings run no OpenMP kernels: they skip the
// wait policy's re-execution (the cost of loading the libraries again).
bool runs_kernels(const std::string& command) {
  static const std::set<std::string> quick = {"cancel",   "env", "job",    "jobs",  "logs",
                                              "services", "smi", "submit", "token", "version"};
  return !quick.count(command);
}

// "zenith: unknown command 'trian' (did you mean 'train'?)", else the list of commands.
int unknown_command(const char* name) {
  std::vector<std::string> names;
  for (const auto& c : commands()) names.push_back(c.name);
  if (auto best = nearest(name, names)) {
    std::fprintf(stderr, "zenith: unknown command '%s' (did you mean '%s'?)\n", name,
                 best->c_str());
  } else {
    std::fprintf(stderr, "zenith: unknown command '%s'\n\n", name);
    print_usage();
  }
  return 2;
}

}  // namespace
}  // namespace zenith::cli

ZENITH_COMMAND("version", "Print zenith's version and the commit it was built from",
               zenith::cli::print_version);

int main(int argc, char** argv) {
  using namespace zenith::cli;
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "help")) {
    print_usage();
    return argc < 2 ? 2 : 0;
  }
  if (!std::strcmp(argv[1], "--version") || !std::strcmp(argv[1], "-V"))
    return print_version(argc, argv);
  for (const auto& c : commands()) {
    if (c.name == argv[1]) {
      if (runs_kernels(c.name)) apply_omp_defaults(argv);  // may re-execute this program
      try {
        return c.run(argc - 1, argv + 1);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
      }
    }
  }
  return unknown_command(argv[1]);
}
