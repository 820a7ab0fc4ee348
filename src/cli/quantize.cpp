// `zenith quantize --model DIR --dtype q8_0|q4_0|q4_k --out DIR`: the linear layers' weights as
// GGML blocks (include/zenith/quant.h), written as a model directory that generate, perplexity
// and Llama loading read back with the blocks unchanged (models::save_quantized): safetensors
// with the blocks as U8 tensors and config.json's quantization_config, plus the tokenizer files.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>

#include "cli/command.h"
#include "cli/llm_common.h"

namespace zenith::cli {
namespace {

int64_t weight_bytes(const models::Llama& model) {
  int64_t bytes = 0;
  for (const auto& [name, t] : model.hf_state()) bytes += int64_t(t.nbytes());
  for (const auto& [path, layer] : model.linear_layers())
    if (const QuantizedWeight* q = layer->quantized_weight()) bytes += int64_t(q->blocks.nbytes());
  return bytes;
}

int run_quantize(int argc, char** argv) {
  std::string model_dir, adapter, dtype, out;
  CLI::App app{"Quantize a LLaMA-family model's linear layers to GGML blocks", "zenith quantize"};
  app.add_option("--model", model_dir, "model directory (config.json, safetensors)")->required();
  app.add_option("--adapter", adapter, "a PEFT LoRA adapter directory, merged in first");
  app.add_option("--dtype", dtype, "block format: q8_0, q4_0 or q4_k")
      ->required()
      ->check(CLI::IsMember({"q8_0", "q4_0", "q4_k"}));
  app.add_option("--out", out, "output model directory")->required();
  if (auto exit_code = parse_args(app, argc, argv)) return *exit_code;
  namespace fs = std::filesystem;
  ZENITH_CHECK(fs::weakly_canonical(model_dir) != fs::weakly_canonical(out),
               "[quantize] --out must differ from --model (", out, ")");
  ZENITH_CHECK(
      out.size() < 5 || out.substr(out.size() - 5) != ".gguf",
      "[quantize] --out names a directory; for a GGUF file use zenith export --format gguf");
  auto model = load_llama(model_dir, adapter);
  if (!adapter.empty()) models::merge_lora(*model);
  const int64_t before = weight_bytes(*model);
  const std::map<std::string, QuantFormat> layers = model->quantize(quant_from_name(dtype));
  int64_t fallback = 0;
  for (const auto& [path, f] : layers) fallback += quant_name(f) != dtype;
  models::save_quantized(*model, out);
  models::copy_model_side_files(model_dir, out);
  std::printf("quantized %zu linear layers of %s to %s", layers.size(), model_dir.c_str(),
              dtype.c_str());
  if (fallback) std::printf(" (%lld as q4_0: rows not a multiple of 256)", (long long)fallback);
  std::printf(" -> %s: weights %.2f MB (were %.2f MB)\n", out.c_str(),
              double(weight_bytes(*model)) / 1e6, double(before) / 1e6);
  return 0;
}

}  // namespace

ZENITH_COMMAND("quantize", "Quantize a LLaMA model's linear layers (q8_0, q4_0, q4_k)",
               run_quantize);

}  // namespace zenith::cli
