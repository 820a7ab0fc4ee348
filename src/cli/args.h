// Parsing a subcommand's arguments the one way every `zenith` command does: CLI11's errors, a
// "did you mean" for a mistyped option or subcommand, required options marked in --help.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

namespace zenith::cli {

// Parses argv into `app`. Returns nullopt to go on, or the exit code to return at once (0 after
// --help, CLI11's code (105-115) after an error, with the message and a suggestion already on
// stderr):
//   if (auto exit_code = parse_args(app, argc, argv)) return *exit_code;
std::optional<int> parse_args(CLI::App& app, int argc, char** argv);

// The candidate nearest to `word` by edit distance when it is near enough to be a typo: at most
// 2 edits or a third of the word's length, the job YAML's rule for its keys. For flags,
// subcommands and `zenith`'s commands.
std::optional<std::string> nearest(const std::string& word, const std::vector<std::string>& known);

}  // namespace zenith::cli
