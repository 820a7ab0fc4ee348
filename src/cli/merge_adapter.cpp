// `zenith merge-adapter --model DIR --adapter DIR --out DIR`: W += B A scaling for every layer a
// PEFT LoRA adapter adapts, in the base weights' dtype, written as a new HF model directory
// (config.json, weights, and the base's tokenizer files) that loads without the adapter.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>

#include "cli/command.h"
#include "cli/llm_common.h"

namespace zenith::cli {
namespace {

int run_merge_adapter(int argc, char** argv) {
  std::string model_dir, adapter, out;
  CLI::App app{"Merge a LoRA adapter into its base model", "zenith merge-adapter"};
  app.add_option("--model", model_dir, "base model directory")->required();
  app.add_option("--adapter", adapter, "PEFT LoRA adapter directory")->required();
  app.add_option("--out", out, "output model directory")->required();
  if (auto exit_code = parse_args(app, argc, argv)) return *exit_code;
  namespace fs = std::filesystem;
  ZENITH_CHECK(fs::weakly_canonical(model_dir) != fs::weakly_canonical(out),
               "[merge-adapter] --out must differ from --model (", out, ")");
  auto model = load_llama(model_dir, adapter);
  const std::vector<std::string> merged = models::merge_lora(*model);
  model->save_pretrained(out);
  models::copy_model_side_files(model_dir, out);
  std::printf("merged the adapter %s into %zu layers of %s (%s) -> %s\n", adapter.c_str(),
              merged.size(), model_dir.c_str(), dtype_name(model->weight_dtype()), out.c_str());
  return 0;
}

}  // namespace

ZENITH_COMMAND("merge-adapter", "Merge a PEFT LoRA adapter into its base model", run_merge_adapter);

}  // namespace zenith::cli
