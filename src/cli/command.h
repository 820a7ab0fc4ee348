// Subcommand registry of the `zenith` binary: each src/cli/<name>.cpp registers one command.
#pragma once

#include <string>
#include <vector>

#include "cli/args.h"  // parse_args: how every command parses its arguments

namespace zenith::cli {

// A subcommand receives its own arguments: argv[0] is the subcommand's name.
using CommandFn = int (*)(int argc, char** argv);

struct Command {
  std::string name;
  std::string summary;
  CommandFn run;
};

std::vector<Command>& commands();

struct Registrar {
  Registrar(const char* name, const char* summary, CommandFn run) {
    commands().push_back({name, summary, run});
  }
};

}  // namespace zenith::cli

#define ZENITH_CONCAT_INNER(a, b) a##b
#define ZENITH_CONCAT(a, b) ZENITH_CONCAT_INNER(a, b)
// ZENITH_COMMAND("train", "Train a model from the zoo", run_train);
#define ZENITH_COMMAND(name, summary, fn) \
  static ::zenith::cli::Registrar ZENITH_CONCAT(zenith_command_, __LINE__)(name, summary, fn)
