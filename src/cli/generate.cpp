// `zenith generate --model DIR [--adapter DIR] (--prompt TEXT | --prompt-ids 1,2,3)
// [--max-new-tokens N] [--temperature T] [--top-k K] [--top-p P] [--repetition-penalty R]
// [--seed S] [--chat] [--chat-template NAME] [--json]`: continues a prompt with a KV cache,
// streaming the text to stdout as it is generated (the ids, when the model directory has no
// tokenizer; control characters but newline and tab escaped as \xNN). The settings not given
// come from the model's generation_config.json, else greedy (models::resolve_generation_config,
// as transformers); --temperature 0 is greedy. --json prints one object instead: {"tokens":
// generated ids (prompt excluded), "text": their decoding (null without a tokenizer),
// "prompt_tokens", "stop_reason" (eos, max_new_tokens, context), "tokens_per_second"}.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/command.h"
#include "cli/llm_common.h"
#include "models/llama_quant.h"
#include "zenith/context.h"
#include "zenith/gguf.h"

namespace zenith::cli {
namespace {

struct GenerateArgs {
  std::string model, adapter, prompt, prompt_ids, chat_template;
  bool chat = false, json = false;
  // Read into these; only the flags given override the model's generation_config.json.
  int64_t max_new_tokens = 0, top_k = 0;
  double temperature = 0, top_p = 0, repetition_penalty = 0;
  uint64_t seed = 0;
};

// Text as a terminal shows it: control characters other than newline and tab (a small model's
// stray byte tokens) become \xNN.
std::string printable(const std::string& text) {
  std::string out;
  for (char c : text) {
    const auto byte = uint8_t(c);
    if ((byte < 0x20 && c != '\n' && c != '\t') || byte == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out;
}

// The prompt as ids: the given ids, the text encoded (bos as the tokenizer adds it), or the text
// as one user message of the chat template.
std::vector<int64_t> prompt_ids(const GenerateArgs& a, const text::Tokenizer* tokenizer) {
  if (!a.prompt_ids.empty()) return parse_id_list(a.prompt_ids, "--prompt-ids");
  ZENITH_CHECK(tokenizer != nullptr, "[generate] ", a.model,
               " has no tokenizer (tokenizer.json or tokenizer.model): give --prompt-ids");
  if (!a.chat) return to_int64(tokenizer->encode(a.prompt));
  auto chat_template = text::ChatTemplate::for_tokenizer(*tokenizer, a.chat_template);
  const std::vector<text::ChatMessage> messages = {{"user", a.prompt}};
  return to_int64(text::encode_chat(*tokenizer, chat_template, messages, true).ids);
}

int run_generate(int argc, char** argv) {
  GenerateArgs a;
  CLI::App app{"Continue a prompt with a LLaMA-family model (HF directory)", "zenith generate"};
  app.add_option("--model", a.model, "model directory (config.json, safetensors)")->required();
  app.add_option("--adapter", a.adapter,
                 "a PEFT LoRA adapter directory or GGUF adapter file, applied unmerged");
  auto* text = app.add_option("--prompt", a.prompt, "prompt text");
  auto* ids = app.add_option("--prompt-ids", a.prompt_ids, "prompt token ids: 1,2,3");
  text->excludes(ids);
  const std::string from_model = " (default: generation_config.json's, else ";
  auto* max_new = app.add_option("--max-new-tokens", a.max_new_tokens,
                                 "tokens to generate at most" + from_model + "128)");
  auto* temperature = app.add_option("--temperature", a.temperature,
                                     "sampling temperature; 0: greedy" + from_model + "greedy)");
  auto* top_k = app.add_option("--top-k", a.top_k,
                               "sample among the k most likely; 0: off" + from_model + "50)");
  auto* top_p = app.add_option("--top-p", a.top_p,
                               "sample within this probability mass; 1: off" + from_model + "1)");
  auto* penalty =
      app.add_option("--repetition-penalty", a.repetition_penalty,
                     "divide the scores of tokens seen so far (HF's); 1: off" + from_model + "1)");
  auto* seed = app.add_option("--seed", a.seed, "random seed of the sampler (default 0)");
  app.add_flag("--chat", a.chat, "wrap the prompt as a user message of the chat template");
  app.add_option("--chat-template", a.chat_template,
                 "llama-2, llama-3, chatml or alpaca (default: tokenizer_config.json's); "
                 "implies --chat");
  app.add_flag("--json", a.json, "print one JSON object with the ids and the text");
  std::string dtype;
  app.add_option("--dtype", dtype, kLoadDtypeHelp);
  int64_t threads = 0;
  app.add_option("--threads", threads, "compute threads (0: the default)");
  if (auto exit_code = parse_args(app, argc, argv)) return *exit_code;
  ZENITH_CHECK(threads >= 0, "[generate] --threads must be >= 0, got ", threads);
  if (threads > 0) context::set_num_threads(int(threads));
  ZENITH_CHECK(text->count() + ids->count() == 1, "[generate] give --prompt TEXT or --prompt-ids");
  a.chat = a.chat || !a.chat_template.empty();
  ZENITH_CHECK(!(a.chat && ids->count()), "[generate] --chat needs --prompt TEXT, not ids");

  auto model = load_llama(a.model, a.adapter, dtype);
  models::pack_for_inference(*model);  // quantized weights held once (interleaved)
  if (const std::string note = precision_note(dtype); !note.empty() && !a.json)
    std::fprintf(stderr, "[generate] %s\n", note.c_str());
  auto tokenizer = models::find_model_tokenizer(a.model);
  const std::vector<int64_t> prompt = prompt_ids(a, tokenizer.get());
  auto given = [](const CLI::Option* option, auto value) {
    return option->count() ? std::optional(value) : std::nullopt;
  };
  models::GenerationConfig g = models::resolve_generation_config(
      a.model, {.max_new_tokens = given(max_new, a.max_new_tokens),
                .temperature = given(temperature, a.temperature),
                .top_k = given(top_k, a.top_k),
                .top_p = given(top_p, a.top_p),
                .repetition_penalty = given(penalty, a.repetition_penalty),
                .do_sample = std::nullopt,
                .seed = given(seed, a.seed)});
  g.eos_token_ids = text::generation_eos_ids(model->config().eos_token_ids, tokenizer.get());

  std::unique_ptr<text::StreamDecoder> stream;
  if (!a.json && tokenizer) stream = std::make_unique<text::StreamDecoder>(*tokenizer, true);
  auto start = std::chrono::steady_clock::now();
  models::GenerationResult result = models::generate(*model, prompt, g, [&](int64_t id) {
    if (a.json) return;
    if (stream)
      std::fputs(printable(stream->push(int32_t(id))).c_str(), stdout);
    else
      std::printf("%lld ", (long long)id);
    std::fflush(stdout);
  });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double rate = seconds > 0 ? double(result.tokens.size()) / seconds : 0;
  if (a.json) {
    nlohmann::json out = {{"tokens", result.tokens},
                          {"prompt_tokens", prompt.size()},
                          {"stop_reason", result.stop_reason},
                          {"tokens_per_second", rate}};
    std::vector<int32_t> generated(result.tokens.begin(), result.tokens.end());
    out["text"] = tokenizer ? nlohmann::json(tokenizer->decode(generated, true)) : nullptr;
    std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  if (stream) std::fputs(printable(stream->finish()).c_str(), stdout);
  std::printf("\n");
  std::fflush(stdout);  // the text before the summary, also when both go to one pipe
  std::fprintf(
      stderr, "[generate] %zu prompt tokens, %zu generated in %.2f s (%.1f tokens/s), %s\n",
      prompt.size(), result.tokens.size(), seconds, rate,
      result.stop_reason == "eos"       ? "stopped at eos"
      : result.stop_reason == "context" ? "stopped: the context (max_position_embeddings) is full"
                                        : "reached --max-new-tokens");
  return 0;
}

}  // namespace

ZENITH_COMMAND("generate", "Generate text with a LLaMA-family model (KV cache, sampling)",
               run_generate);

}  // namespace zenith::cli
