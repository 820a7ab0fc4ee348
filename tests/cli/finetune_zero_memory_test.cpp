// Issue 39's memory demonstration as a user runs it: one job YAML whose `memory` is below what
// one process needs for a 109.5M-parameter LLaMA's weights, gradients and AdamW states (16Ψ =
// 1.63 GiB, plus the step's transients), run with `zenith run` on the local backend. The job
// with one rank fails with an `oom` alert naming the rank and the per-rank limit; the same
// YAML with 4 ranks and `zenith finetune --method full --zero 3` trains, each rank under that
// limit (a memory cgroup of its own, or RLIMIT_AS where the host has no cgroup). About 30 s on
// 2 busy cores (labelled slow).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "support/run_zenith.h"
#include "support/temp_dir.h"

namespace zenith::testing {
namespace {

namespace fs = std::filesystem;

class FinetuneZeroMemory : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv("ZENITH_DATA", (root_ / "platform").c_str(), 1);  // the jobs' logs
    // The ~110M LLaMA of the issue: hidden 768, 12 layers, vocabulary 32000, tied embeddings.
    nlohmann::json config = nlohmann::json::parse(
        std::ifstream(std::string(ZENITH_SOURCE_DIR) + "/examples/llm/demo-llama/config.json"));
    config["hidden_size"] = 768;
    config["intermediate_size"] = 2048;
    config["num_hidden_layers"] = 12;
    config["num_attention_heads"] = 12;
    config["num_key_value_heads"] = 12;
    config["head_dim"] = 64;
    config["vocab_size"] = 32000;
    config["max_position_embeddings"] = 64;
    std::ofstream(root_ / "config.json") << config.dump(1);
    std::mt19937 rng(39);
    std::ofstream data(root_ / "train.jsonl");
    for (int i = 0; i < 8; ++i) {
      nlohmann::json ids = nlohmann::json::array();
      for (int t = 0; t < 32; ++t) ids.push_back(3 + int(rng() % 31997));
      data << nlohmann::json{{"input_ids", ids}, {"labels", ids}}.dump() << "\n";
    }
  }
  // `npu` ranks under `memory: 2Gi` each, one full fine-tuning step from random weights.
  std::string job(const std::string& name, int npu, const std::string& flags) const {
    const fs::path path = root_ / (name + ".yaml");
    std::ofstream(path) << "job:\n  name: " << name << "\n  resources: { npu: " << npu
                        << ", memory: 2Gi }\n  entry: " << ZENITH_BINARY
                        << " finetune --method full --init random --model-config "
                        << (root_ / "config.json").string() << " --data "
                        << (root_ / "train.jsonl").string()
                        << " --max-steps 1 --max-seq-len 32 --out " << (root_ / name).string()
                        << " " << flags << "\n";
    return path.string();
  }
  TempDir dir_{"finetune_zero_memory"};
  fs::path root_ = dir_.path();
};

TEST_F(FinetuneZeroMemory, OneProcessRunsOutOfMemoryAndFourRanksAtStageThreeTrain) {
  // One process: 1.63 GiB of model state alone, 3.3 GiB at its peak. Out of memory.
  CliResult one = run_zenith("run " + job("one", 1, "--batch-size 4"));
  EXPECT_NE(one.code, 0) << one.output;
  EXPECT_NE(one.output.find("[alert] oom: job"), std::string::npos) << one.output;
  EXPECT_NE(one.output.find("rank 0 "), std::string::npos) << one.output;
  EXPECT_NE(one.output.find("out of memory (limit 2Gi per rank)"), std::string::npos) << one.output;
  EXPECT_FALSE(fs::exists(root_ / "one/model.safetensors"));

  // 4 ranks at ZeRO-3 under the same per-rank limit: 418 MiB of model state each.
  CliResult zero = run_zenith("run " + job("zero3", 4, "--zero 3 --batch-size 1"));
  ASSERT_EQ(zero.code, 0) << zero.output;
  EXPECT_NE(zero.output.find("ZeRO stage 3 over 4 ranks"), std::string::npos) << zero.output;
  EXPECT_NE(zero.output.find("model state 417.8 MiB per rank at the step (one process: 1671.3 "
                             "MiB)"),
            std::string::npos)
      << zero.output;
  EXPECT_EQ(zero.output.find("out of memory"), std::string::npos) << zero.output;
  EXPECT_TRUE(fs::exists(root_ / "zero3/model.safetensors"));
  std::ifstream metrics(root_ / "zero3/metrics.jsonl");
  bool loss = false;
  for (std::string line; std::getline(metrics, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j["name"] == "loss") loss = std::isfinite(j["value"].get<double>());
  }
  EXPECT_TRUE(loss) << "the step's loss in metrics.jsonl";
}

}  // namespace
}  // namespace zenith::testing
