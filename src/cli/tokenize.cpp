// `zenith tokenize --model DIR --text TEXT [--json]`: the ids and token strings of TEXT under the
// tokenizer of a model directory (tokenizer.json, else tokenizer.model). Plain output is two
// lines, `ids: 1 15043 3186` and `tokens: <s> ▁Hello ▁world`; --json prints
// {"ids": [...], "tokens": [...]}.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "zenith/text.h"

namespace zenith::cli {
namespace {

// Control characters in a token string written as escapes, so each list stays on one line.
std::string printable(const std::string& piece) {
  std::string out;
  for (char c : piece) {
    if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c == '\r')
      out += "\\r";
    else
      out.push_back(c);
  }
  return out;
}

int run_tokenize(int argc, char** argv) {
  std::string model, input;
  bool json = false, no_special = false, split_special = false;
  CLI::App app{"Tokenize text with a model directory's tokenizer", "zenith tokenize"};
  app.add_option("--model", model, "model directory (tokenizer.json or tokenizer.model)")
      ->required();
  app.add_option("--text", input, "the text to tokenize")->required();
  app.add_flag("--json", json, "print {\"ids\": [...], \"tokens\": [...]}");
  app.add_flag("--no-special", no_special, "do not add bos/eos");
  app.add_flag("--split-special", split_special,
               "treat special-token text such as <|eot_id|> as plain text");
  if (auto exit_code = parse_args(app, argc, argv)) return *exit_code;

  auto tokenizer = text::Tokenizer::from_dir(model);
  std::vector<int32_t> ids =
      tokenizer->encode(input, {.add_special = !no_special, .parse_special = !split_special});
  std::vector<std::string> tokens;
  for (int32_t id : ids) tokens.push_back(tokenizer->id_to_piece(id));
  if (json) {
    nlohmann::json out = {{"ids", ids}, {"tokens", tokens}};
    std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  std::string id_line = "ids:", token_line = "tokens:";
  for (size_t i = 0; i < ids.size(); ++i) {
    id_line += " " + std::to_string(ids[i]);
    token_line += " " + printable(tokens[i]);
  }
  std::printf("%s\n%s\n", id_line.c_str(), token_line.c_str());
  return 0;
}

}  // namespace

ZENITH_COMMAND("tokenize", "Show the token ids of a text under a model's tokenizer", run_tokenize);

}  // namespace zenith::cli
