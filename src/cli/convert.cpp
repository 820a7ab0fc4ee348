// `zenith convert --from llama2c --checkpoint FILE --out DIR [--dtype f32|bf16|f16]
// [--tokenizer tokenizer.model] [--max-shard-size 5GB]`: a llama2.c checkpoint to a Hugging Face
// model directory (config.json, model.safetensors or shards + index, tokenizer.model) that
// transformers' from_pretrained and `zenith generate --model DIR` read.
#include <CLI/CLI.hpp>
#include <cctype>
#include <cstdio>

#include "cli/command.h"
#include "zenith/llama2c.h"

namespace zenith::cli {
namespace {

// "5GB" (10^9, as transformers counts), "500MiB" (2^20), or plain bytes.
uint64_t parse_size(const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(uint8_t(text[digits]))) ++digits;
  ZENITH_CHECK(digits > 0 && digits <= 15, "[convert] --max-shard-size '", text,
               "' is not a size like 5GB, 500MB or 2GiB");
  uint64_t n = std::stoull(text.substr(0, digits));
  std::string unit = text.substr(digits);
  for (auto& ch : unit) ch = char(std::toupper(uint8_t(ch)));
  static const std::pair<const char*, uint64_t> units[] = {{"", 1},
                                                           {"B", 1},
                                                           {"KB", 1000},
                                                           {"MB", 1000'000},
                                                           {"GB", 1000'000'000},
                                                           {"KIB", 1 << 10},
                                                           {"MIB", 1 << 20},
                                                           {"GIB", uint64_t(1) << 30}};
  for (const auto& [name, scale] : units)
    if (unit == name && n > 0) return n * scale;
  ZENITH_FAIL("[convert] --max-shard-size '", text, "' is not a size like 5GB, 500MB or 2GiB");
}

int run_convert(int argc, char** argv) {
  std::string from, checkpoint, out, dtype = "f32", tokenizer, max_shard = "5GB";
  CLI::App app{"Convert a llama2.c checkpoint to a Hugging Face model directory", "zenith convert"};
  app.add_option("--from", from, "source format: llama2c")->required();
  app.add_option("--checkpoint", checkpoint, "the checkpoint (.bin)")->required();
  app.add_option("--out", out, "output directory")->required();
  app.add_option("--dtype", dtype, "weights dtype: f32, bf16 or f16")->capture_default_str();
  app.add_option("--tokenizer", tokenizer, "a SentencePiece tokenizer.model to copy along");
  app.add_option("--max-shard-size", max_shard, "largest weights file (5GB, 500MB, bytes)")
      ->capture_default_str();
  if (auto exit_code = parse_args(app, argc, argv)) return *exit_code;
  ZENITH_CHECK(from == "llama2c", "[convert] --from '", from,
               "' is not supported (known: llama2c)");
  ZENITH_CHECK(dtype == "f32" || dtype == "bf16" || dtype == "f16", "[convert] --dtype '", dtype,
               "' is not supported (f32, bf16 or f16)");
  models::Llama2cConvertOptions options;
  options.dtype = dtype_from_name(dtype);
  options.max_shard_bytes = parse_size(max_shard);
  options.tokenizer = tokenizer;
  models::LlamaConfig c = models::convert_llama2c(checkpoint, out, options);
  int64_t params = 0;
  for (const auto& p : models::expected_llama_parameters(c)) params += shape_numel(p.shape);
  std::printf(
      "%s -> %s: %s, %lld layers, hidden %lld, %lld heads (%lld kv), vocab %lld%s, "
      "%.2fM parameters, %s\n",
      checkpoint.c_str(), out.c_str(), c.architecture.c_str(), (long long)c.num_hidden_layers,
      (long long)c.hidden_size, (long long)c.num_attention_heads, (long long)c.num_key_value_heads,
      (long long)c.vocab_size, c.tie_word_embeddings ? " (tied)" : "", params / 1e6,
      c.torch_dtype.c_str());
  return 0;
}

}  // namespace

ZENITH_COMMAND("convert", "Convert a llama2.c checkpoint to a Hugging Face model directory",
               run_convert);

}  // namespace zenith::cli
