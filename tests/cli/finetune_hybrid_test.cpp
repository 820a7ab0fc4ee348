// The combinations of `zenith finetune`'s parallel modes with LoRA, evaluation data and --resume,
// as a user runs them, each against one process with the same global batch: the same losses,
// gradient norms and eval losses (1e-5 relative), and the same PEFT adapter or model at the end.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/checkpoint_compare.h"
#include "support/finetune_cli_runs.h"
#include "support/run_zenith.h"
#include "support/temp_dir.h"

namespace zenith::testing {
namespace {

namespace fs = std::filesystem;

class FinetuneHybrid : public ::testing::Test {
 protected:
  void SetUp() override { ::setenv("ZENITH_DATA", (root_ / "platform").c_str(), 1); }
  // A run of `steps` steps on train.jsonl with eval.jsonl, writing to root_/out.
  std::string args(const std::string& method, const std::string& out, int steps = 3) const {
    return "finetune --model " + std::string(ZENITH_SOURCE_DIR) +
           "/examples/llm/demo-llama --data " + (root_ / "train.jsonl").string() + " --eval-data " +
           (root_ / "eval.jsonl").string() + " --method " + method +
           " --lora-targets all-linear --lora-dropout 0 --lr 1e-3 --warmup-steps 0 "
           "--schedule constant --max-steps " +
           std::to_string(steps) + " --out " + (root_ / out).string();
  }
  // `got`'s losses, gradient norms and eval losses within 1e-5 of `want`'s (`steps` of them), and
  // its output file within `tolerance` (AdamW's first steps turn float32 sums in another order
  // into 1e-5 relative).
  void expect_as(const std::string& want, const std::string& got, const std::string& file,
                 double tolerance, int tensors, size_t steps = 3) {
    expect_run_as(root_, want, got, steps, true, file, tolerance, tensors);
  }
  TempDir dir_{"finetune_hybrid"};
  fs::path root_ = dir_.path();
};

// LoRA under --zero 1, 2 and 3 on 2 ranks of 2 examples trains as one process of 4: the
// adapters' AdamW states (and at stages 2 and 3 their gradients, at 3 the adapters themselves)
// sharded, the frozen base whole on every rank; the same PEFT adapter files written at the end,
// and a checkpoint that resumes at another stage.
TEST_F(FinetuneHybrid, LoraUnderZeroMatchesOneProcess) {
  write_sequence_data(root_ / "train.jsonl", 12, 7, true);
  write_sequence_data(root_ / "eval.jsonl", 5, 8, true);
  CliResult single = run_zenith(args("lora", "single") + " --batch-size 4");
  ASSERT_EQ(single.code, 0) << single.output;
  const nlohmann::json config =
      nlohmann::json::parse(std::ifstream(root_ / "single/adapter_config.json"));
  for (const char* stage : {"1", "2", "3"}) {
    const std::string out = std::string("zero") + stage;
    CliResult zero = run_zenith(args("lora", out) + " --batch-size 2 --nproc 2 --save-every 2" +
                                " --zero " + stage);
    ASSERT_EQ(zero.code, 0) << zero.output;
    EXPECT_NE(zero.output.find(std::string("rank 1: ZeRO stage ") + stage), std::string::npos)
        << zero.output;
    expect_as("single", out, "adapter_model.safetensors", 1e-4, 28);
    EXPECT_EQ(nlohmann::json::parse(std::ifstream(root_ / out / "adapter_config.json")), config)
        << out;
  }
  // Stage 3's checkpoint (its zero/ shards of the adapters and their AdamW slots) resumed at
  // stage 1 ends where the uninterrupted run did.
  CliResult resumed = run_zenith(args("lora", "resumed") + " --batch-size 2 --nproc 2 --zero 1" +
                                 " --resume " + (root_ / "zero3/checkpoint-2").string());
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  auto want = read_metrics(root_ / "zero3/metrics.jsonl");
  auto got = read_metrics(root_ / "resumed/metrics.jsonl");
  EXPECT_NEAR(got["loss"][3], want["loss"][3], 1e-6 * want["loss"][3]);
  EXPECT_TRUE(same_parameters((root_ / "zero3/adapter_model.safetensors").string(),
                              (root_ / "resumed/adapter_model.safetensors").string(), 1e-5, 28));
}

// LoRA with pipeline stages (and tensor x pipeline on 4 ranks) trains as one process: each stage
// trains its layers' adapters; the adapter gathered from the stages at the end is one process's.
// The eval loss runs through the stages (and the vocabulary-parallel loss) too.
TEST_F(FinetuneHybrid, LoraWithPipelineStagesMatchesOneProcess) {
  write_sequence_data(root_ / "train.jsonl", 16, 5, false);
  write_sequence_data(root_ / "eval.jsonl", 5, 6, false);
  const std::string base = " --batch-size 4 --micro-batches 2";
  CliResult single = run_zenith(args("lora", "single") + " --batch-size 4");
  ASSERT_EQ(single.code, 0) << single.output;
  CliResult pp = run_zenith(args("lora", "pp") + base + " --pipeline-parallel 2 --nproc 2");
  ASSERT_EQ(pp.code, 0) << pp.output;
  expect_as("single", "pp", "adapter_model.safetensors", 1e-4, 28);
  CliResult tp_pp = run_zenith(args("lora", "tp_pp") + base +
                               " --tensor-parallel 2 --pipeline-parallel 2 --nproc 4");
  ASSERT_EQ(tp_pp.code, 0) << tp_pp.output;
  expect_as("single", "tp_pp", "adapter_model.safetensors", 1e-4, 28);
  EXPECT_TRUE(fs::exists(root_ / "tp_pp/adapter_config.json"));
}

// With ragged padding the micro-batches hold different numbers of learned labels: the pipeline
// weights each micro-batch's mean loss by its labels over the step's (every data rank's), so
// pipeline 2, pipeline 2 x data 2 and tensor 2 + sequence parallel still equal one process's
// token mean (losses, norms, eval
// losses within 1e-5). The weights within 5e-4: on ragged data AdamW carries float32 rounding of
// near-zero gradients (layer 1's up_proj) to 1.5e-4 here, 2.4e-4 with data 2, as much with one
// micro-batch (weight 1) and 2.2e-4 with tensor 2: not the weighting.
TEST_F(FinetuneHybrid, PipelineLossIsTokenWeightedWithRaggedPadding) {
  write_sequence_data(root_ / "train.jsonl", 16, 9, true);
  write_sequence_data(root_ / "eval.jsonl", 5, 10, true);
  CliResult single = run_zenith(args("full", "single") + " --batch-size 4");
  ASSERT_EQ(single.code, 0) << single.output;
  CliResult pp = run_zenith(args("full", "pp") +
                            " --batch-size 4 --pipeline-parallel 2 --micro-batches 2 --nproc 2");
  ASSERT_EQ(pp.code, 0) << pp.output;
  expect_as("single", "pp", "model.safetensors", 5e-4, 20);
  CliResult dp_pp = run_zenith(args("full", "dp_pp") +
                               " --batch-size 2 --pipeline-parallel 2 --micro-batches 2 --nproc 4");
  ASSERT_EQ(dp_pp.code, 0) << dp_pp.output;
  EXPECT_NE(dp_pp.output.find("tensor 1 x pipeline 2 x data 2"), std::string::npos) << dp_pp.output;
  expect_as("single", "dp_pp", "model.safetensors", 5e-4, 20);
  // Sequence parallel splits the positions: the batches pad to a multiple of the tensor degree.
  CliResult sp = run_zenith(args("full", "sp") +
                            " --batch-size 4 --tensor-parallel 2 --sequence-parallel --nproc 2");
  ASSERT_EQ(sp.code, 0) << sp.output;
  expect_as("single", "sp", "model.safetensors", 5e-4, 20);
}

// A pipeline run stopped at step 2 (its checkpoint: the whole model, and every rank's AdamW shards
// with their global offsets in checkpoint-2/parallel) and resumed ends where the uninterrupted
// run did: the same losses, eval losses and model; resumed under tensor parallel instead (another
// layout of the same shards) too.
TEST_F(FinetuneHybrid, ModelParallelRunsResumeWhereTheyLeftOff) {
  write_sequence_data(root_ / "train.jsonl", 16, 5, false);
  write_sequence_data(root_ / "eval.jsonl", 5, 6, false);
  const std::string pp = " --batch-size 4 --pipeline-parallel 2 --micro-batches 2 --nproc 2";
  CliResult whole = run_zenith(args("full", "whole", 4) + pp + " --save-every 2 --eval-steps 2");
  ASSERT_EQ(whole.code, 0) << whole.output;
  const fs::path checkpoint = root_ / "whole/checkpoint-2";
  ASSERT_TRUE(fs::exists(checkpoint / "parallel/metadata.json")) << whole.output;
  auto want = read_metrics(root_ / "whole/metrics.jsonl");
  ASSERT_EQ(want["loss"].size(), 4u);
  const std::pair<const char*, std::string> layouts[] = {
      {"same", pp}, {"tensor", " --batch-size 4 --tensor-parallel 2 --nproc 2"}};
  for (const auto& [out, flags] : layouts) {
    CliResult resumed = run_zenith(args("full", out, 4) + flags + " --eval-steps 2 --resume " +
                                   checkpoint.string());
    ASSERT_EQ(resumed.code, 0) << resumed.output;
    EXPECT_NE(resumed.output.find("resumed from"), std::string::npos) << resumed.output;
    auto got = read_metrics(root_ / out / "metrics.jsonl");
    ASSERT_EQ(got["loss"].size(), 2u) << out;
    for (const char* name : {"loss", "grad_norm"})
      for (int64_t step : {3, 4})
        EXPECT_NEAR(got[name][step], want[name][step], 1e-5 * std::abs(want[name][step]))
            << out << " " << name << " step " << step;
    EXPECT_NEAR(got["eval/loss"][4], want["eval/loss"][4], 1e-5 * want["eval/loss"][4]) << out;
    EXPECT_TRUE(same_parameters((root_ / "whole/model.safetensors").string(),
                                (root_ / out / "model.safetensors").string(), 1e-4, 20))
        << out;
  }
  // The run's end (no parallel/ shards) is not a checkpoint to resume a model-parallel run from.
  CliResult plain =
      run_zenith(args("full", "plain", 4) + pp + " --resume " + (root_ / "whole").string());
  EXPECT_NE(plain.code, 0);
  EXPECT_NE(plain.output.find("parallel/metadata.json (a checkpoint-<step> directory"),
            std::string::npos)
      << plain.output;
}

// A tensor-parallel checkpoint resumed in ONE process (no --tensor-parallel, no --nproc) takes
// every parameter's whole AdamW state, assembled from the ranks' pieces in parallel/ by their
// global offsets (trainer_state holds rank 0's shards only): it ends where the uninterrupted run
// did. A piece missing from the checkpoint is an error naming it.
TEST_F(FinetuneHybrid, TensorParallelCheckpointResumesInOneProcess) {
  write_sequence_data(root_ / "train.jsonl", 16, 5, false);
  write_sequence_data(root_ / "eval.jsonl", 5, 6, false);
  CliResult whole = run_zenith(args("full", "whole", 4) +
                               " --batch-size 4 --tensor-parallel 2 --nproc 2 --save-every 2");
  ASSERT_EQ(whole.code, 0) << whole.output;
  const fs::path checkpoint = root_ / "whole/checkpoint-2";
  ASSERT_TRUE(fs::exists(checkpoint / "parallel/metadata.json")) << whole.output;
  CliResult resumed =
      run_zenith(args("full", "one", 4) + " --batch-size 4 --resume " + checkpoint.string());
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  auto want = read_metrics(root_ / "whole/metrics.jsonl");
  auto got = read_metrics(root_ / "one/metrics.jsonl");
  ASSERT_EQ(got["loss"].size(), 2u) << resumed.output;
  for (const char* name : {"loss", "grad_norm"})
    for (int64_t step : {3, 4})
      EXPECT_NEAR(got[name][step], want[name][step], 1e-5 * std::abs(want[name][step]))
          << name << " step " << step;
  EXPECT_TRUE(same_parameters((root_ / "whole/model.safetensors").string(),
                              (root_ / "one/model.safetensors").string(), 1e-4, 20));
  // One slot's pieces gone from metadata.json: the resume stops and names it.
  const fs::path broken = root_ / "broken";
  fs::copy(checkpoint, broken, fs::copy_options::recursive);
  nlohmann::json meta = nlohmann::json::parse(std::ifstream(broken / "parallel/metadata.json"));
  std::string gone;
  for (const auto& [name, _] : meta["tensors"].items())
    if (name != "optimizer.step") gone = name;
  ASSERT_FALSE(gone.empty());
  meta["tensors"].erase(gone);
  std::ofstream(broken / "parallel/metadata.json") << meta.dump();
  CliResult bad =
      run_zenith(args("full", "bad", 4) + " --batch-size 4 --resume " + broken.string());
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.output.find("has no optimizer state '" + gone + "'"), std::string::npos)
      << bad.output;
}

}  // namespace
}  // namespace zenith::testing
