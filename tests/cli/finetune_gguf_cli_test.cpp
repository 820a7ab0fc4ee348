// `zenith finetune --model X.gguf` as a user runs it on a llama.cpp file: the demo model exported
// as q4_0 GGUF, fine-tuned with LoRA (blocks widened to float), QLoRA (the file's q4_0 blocks
// are the frozen base; nf4 requantizes) and fully (float32 weights, the file's vocabulary written
// as tokenizer files), each result used by generate.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/run_zenith.h"
#include "support/temp_dir.h"

namespace zenith::testing {
namespace {

std::string source(const std::string& path) { return std::string(ZENITH_SOURCE_DIR) + "/" + path; }

std::string finetune(const std::string& gguf, const std::string& out, const std::string& flags) {
  return "finetune --model " + gguf + " --data " + source("examples/llm/finetune/train.jsonl") +
         " --eval-data " + source("examples/llm/finetune/eval.jsonl") + " --out " + out +
         " --lr 3e-3 --max-steps 4 --batch-size 8 --progress none " + flags;
}

void expect_generates(const std::string& model_and_adapter) {
  CliResult g = run_zenith("generate " + model_and_adapter +
                           " --prompt \"The GNU General Public License\" --temperature 0 "
                           "--max-new-tokens 4 --json");
  ASSERT_EQ(g.code, 0) << g.output;
  EXPECT_EQ(nlohmann::json::parse(g.output)["tokens"].size(), 4u);
}

double last_eval_loss(const std::filesystem::path& dir, double* first) {
  nlohmann::json log = nlohmann::json::parse(std::ifstream(dir / "eval_log.json"));
  *first = log.front()["eval_loss"].get<double>();
  return log.back()["eval_loss"].get<double>();
}

TEST(FinetuneGgufCli, LoraQloraAndFullFineTuningOfAQ4_0File) {
  TempDir dir("finetune_gguf_cli");
  const std::string gguf = dir / "demo-q4_0.gguf";
  CliResult e = run_zenith("export --format gguf --model " + source("examples/llm/demo-llama") +
                           " --dtype q4_0 --out " + gguf);
  ASSERT_EQ(e.code, 0) << e.output;

  // LoRA: the blocks widened to float32, the tokenizer from the file's vocabulary.
  CliResult lora = run_zenith(finetune(gguf, (dir / "lora"), ""));
  ASSERT_EQ(lora.code, 0) << lora.output;
  // Every weight a parameter again, as from the Hugging Face directory the file was made of.
  EXPECT_NE(lora.output.find("trainable 3584 of 224064 parameters"), std::string::npos)
      << lora.output;
  double first = 0;
  EXPECT_LT(last_eval_loss(dir / "lora", &first), first);
  expect_generates("--model " + gguf + " --adapter " + (dir / "lora"));

  // QLoRA with the file's own format: its blocks are the base as they are.
  CliResult qlora = run_zenith(finetune(gguf, (dir / "qlora"), "--method qlora --quant q4_0"));
  ASSERT_EQ(qlora.code, 0) << qlora.output;
  // q, k, v, o, gate and up (2 x 34816 weights) are blocks, no parameters; down (176 wide, no
  // whole 32-block) stays float.
  EXPECT_NE(qlora.output.find("trainable 3584 of 154432 parameters"), std::string::npos)
      << qlora.output;
  EXPECT_LT(last_eval_loss(dir / "qlora", &first), first);
  expect_generates("--model " + gguf + " --adapter " + (dir / "qlora"));
  // nf4 is not in the file: the weights are widened and requantized.
  CliResult nf4 = run_zenith(finetune(gguf, (dir / "nf4"), "--method qlora --quant nf4"));
  ASSERT_EQ(nf4.code, 0) << nf4.output;
  EXPECT_NE(nf4.output.find("trainable 3584 of 154432 parameters"), std::string::npos)
      << nf4.output;

  // Full fine-tuning: float32 weights and the file's vocabulary as tokenizer files.
  CliResult full = run_zenith(finetune(gguf, (dir / "full"), "--method full"));
  ASSERT_EQ(full.code, 0) << full.output;
  EXPECT_NE(full.output.find("full fine-tuning, float32 weights"), std::string::npos)
      << full.output;
  EXPECT_TRUE(std::filesystem::exists(dir / "full/tokenizer.model"));
  EXPECT_TRUE(std::filesystem::exists(dir / "full/config.json"));
  EXPECT_LT(last_eval_loss(dir / "full", &first), first);
  expect_generates("--model " + (dir / "full"));
}

}  // namespace
}  // namespace zenith::testing
