// `zenith perplexity --model DIR [--adapter DIR] (--ids 1,2,3 | --text-file FILE) [--max-seq-len N]
// [--json]`: the mean next-token negative log-likelihood of the ids (or of FILE's text encoded
// by the model's tokenizer, bos included as the tokenizer adds it) in windows of max-seq-len
// tokens that overlap by one, so every token but the first is predicted once. --json prints
// {"nll", "perplexity", "tokens"} (tokens = predicted tokens).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/command.h"
#include "cli/llm_common.h"
#include "models/llama_quant.h"
#include "zenith/context.h"
#include "zenith/gguf.h"

namespace zenith::cli {
namespace {

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  ZENITH_CHECK(in.good(), "[perplexity] cannot read --text-file ", path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

int run_perplexity(int argc, char** argv) {
  std::string model_dir, adapter, ids_text, text_file, old_text_flag;
  int64_t max_seq_len = 0;
  bool json = false;
  CLI::App app{"Perplexity of a text under a LLaMA-family model", "zenith perplexity"};
  app.add_option("--model", model_dir, "model directory (config.json, safetensors)")->required();
  app.add_option("--adapter", adapter,
                 "a PEFT LoRA adapter directory or GGUF adapter file, applied unmerged");
  auto* ids = app.add_option("--ids", ids_text, "token ids: 1,2,3");
  auto* text =
      app.add_option("--text-file", text_file, "a text file, encoded by the model's tokenizer");
  ids->excludes(text);
  // The old name, hidden: `--text` is a string in `zenith tokenize`, so a file is --text-file.
  auto* old_text = app.add_option("--text", old_text_flag)->group("");
  app.add_option("--max-seq-len", max_seq_len,
                 "window length in tokens (default: max_position_embeddings)");
  app.add_flag("--json", json, "print {\"nll\", \"perplexity\", \"tokens\"}");
  std::string dtype;
  app.add_option("--dtype", dtype, kLoadDtypeHelp);
  int64_t threads = 0;
  app.add_option("--threads", threads, "compute threads (0: the default)");
  if (auto exit_code = parse_args(app, argc, argv)) return *exit_code;
  ZENITH_CHECK(threads >= 0, "[perplexity] --threads must be >= 0, got ", threads);
  if (threads > 0) context::set_num_threads(int(threads));
  ZENITH_CHECK(!old_text->count(), "[perplexity] --text is now --text-file FILE (a file to read; ",
               "--text in `zenith tokenize` is the text itself): use --text-file ", old_text_flag);
  ZENITH_CHECK(ids->count() + text->count() == 1,
               "[perplexity] give --ids 1,2,3 or --text-file FILE");

  auto model = load_llama(model_dir, adapter, dtype);
  models::pack_for_inference(*model);  // quantized weights held once (interleaved)
  if (const std::string note = precision_note(dtype); !note.empty() && !json)
    std::fprintf(stderr, "[perplexity] %s\n", note.c_str());
  std::vector<int64_t> tokens;
  if (ids->count()) {
    tokens = parse_id_list(ids_text, "--ids");
  } else {
    auto tokenizer = models::find_model_tokenizer(model_dir);
    ZENITH_CHECK(tokenizer != nullptr, "[perplexity] ", model_dir,
                 " has no tokenizer (tokenizer.json or tokenizer.model): give --ids");
    tokens = to_int64(tokenizer->encode(read_text_file(text_file)));
  }
  models::PerplexityResult r = models::perplexity(*model, tokens, max_seq_len);
  if (json) {
    nlohmann::json out = {{"nll", r.nll}, {"perplexity", r.perplexity}, {"tokens", r.tokens}};
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf("perplexity %.4f (mean NLL %.6f nats over %lld predicted tokens)\n", r.perplexity,
                r.nll, (long long)r.tokens);
  }
  return 0;
}

}  // namespace

ZENITH_COMMAND("perplexity", "Perplexity of token ids or a text file under a LLaMA-family model",
               run_perplexity);

}  // namespace zenith::cli
