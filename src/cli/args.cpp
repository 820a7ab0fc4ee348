#include "cli/args.h"

#include <algorithm>
#include <limits>

#include "platform/jobs/job_spec.h"  // edit_distance, shared with the job YAML's key check

namespace zenith::cli {
namespace {

// Every spelling `app` and its subcommands accept: "--epochs", "-n", "create", ... (a mistyped
// option may belong to a subcommand, and a fallthrough option to its parent).
void collect_names(const CLI::App& app, std::vector<std::string>& flags,
                   std::vector<std::string>& subcommands) {
  for (const CLI::Option* o : app.get_options()) {
    for (const auto& l : o->get_lnames()) flags.push_back("--" + l);
    for (const auto& s : o->get_snames()) flags.push_back("-" + s);
  }
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    subcommands.push_back(sub->get_name());
    collect_names(*sub, flags, subcommands);
  }
}

// "unknown option '--epoch' (did you mean '--epochs'?)" for each word CLI11 could not place
// that is near a name the command knows; empty when none is.
std::vector<std::string> suggestions(const CLI::App& app) {
  std::vector<std::string> flags, subcommands, out;
  collect_names(app, flags, subcommands);
  for (const std::string& word : app.remaining(true)) {
    const bool is_flag = word.size() > 1 && word[0] == '-';
    const std::string name = is_flag ? word.substr(0, word.find('=')) : word;
    if (auto best = nearest(name, is_flag ? flags : subcommands))
      out.push_back(std::string(is_flag ? "unknown option '" : "unknown subcommand '") + name +
                    "' (did you mean '" + *best + "'?)");
  }
  return out;
}

}  // namespace

std::optional<std::string> nearest(const std::string& word, const std::vector<std::string>& known) {
  std::string best;
  int best_distance = std::numeric_limits<int>::max();
  for (const auto& k : known) {
    const int d = platform::edit_distance(word, k);
    if (d < best_distance) best_distance = d, best = k;
  }
  if (best_distance == 0 || best_distance > std::max<int>(2, int(word.size()) / 3))
    return std::nullopt;
  return best;
}

std::optional<int> parse_args(CLI::App& app, int argc, char** argv) {
  // CLI11 prints "REQUIRED" after a required option's type; say it the way the text around it
  // reads. Subcommands share their parent's formatter.
  app.get_formatter()->label("REQUIRED", "(required)");
  app.failure_message([](const CLI::App* a, const CLI::Error& e) {
    const std::string prefix = a->get_name() + ": ";
    const std::vector<std::string> hints = suggestions(*a);
    // A guess says more than CLI11's "The following arguments were not expected: ...".
    const bool guessed = !hints.empty() && dynamic_cast<const CLI::ExtrasError*>(&e);
    std::string msg = guessed ? "" : prefix + e.what() + "\n";
    for (const auto& hint : hints) msg += prefix + hint + "\n";
    return msg + "Run `" + a->get_name() + " --help` for the options.\n";
  });
  try {
    app.parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
}

}  // namespace zenith::cli
