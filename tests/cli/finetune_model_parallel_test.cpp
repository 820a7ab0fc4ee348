// `zenith finetune --tensor-parallel / --pipeline-parallel --nproc N` as a user runs it: the
// same losses and gradient norms as one process with the same batch (the ranks of a tensor or
// pipeline group see the same rows), the whole model and the PEFT adapter written at the end as
// one process writes them, and the combinations it does not take refused by name.
#include <gtest/gtest.h>

#include <filesystem>

#include "support/checkpoint_compare.h"
#include "support/finetune_cli_runs.h"
#include "support/run_zenith.h"
#include "support/temp_dir.h"

namespace zenith::testing {
namespace {

namespace fs = std::filesystem;

class FinetuneModelParallel : public ::testing::Test {
 protected:
  void SetUp() override {
    write_sequence_data(root_ / "train.jsonl", 16, 5, false);
    ::setenv("ZENITH_DATA", (root_ / "platform").c_str(), 1);
  }
  std::string args(const std::string& method, const std::string& out) const {
    return "finetune --model " + std::string(ZENITH_SOURCE_DIR) +
           "/examples/llm/demo-llama --data " + (root_ / "train.jsonl").string() + " --method " +
           method +
           " --lora-targets all-linear --lora-dropout 0 --lr 1e-3 --warmup-steps 0 "
           "--schedule constant --max-steps 3 --batch-size 4 --out " +
           (root_ / out).string();
  }
  // The run's losses and gradient norms within 1e-5 of `want`'s, and its output within
  // `tolerance` (AdamW's first steps turn float32 sums in another order into 1e-5 relative).
  void expect_as(const std::string& want, const std::string& got, const std::string& file,
                 double tolerance, int tensors) {
    expect_run_as(root_, want, got, 3, false, file, tolerance, tensors);
  }
  TempDir dir_{"finetune_model_parallel"};
  fs::path root_ = dir_.path();
};

TEST_F(FinetuneModelParallel, TensorAndPipelineMatchOneProcess) {
  CliResult single = run_zenith(args("full", "single"));
  ASSERT_EQ(single.code, 0) << single.output;
  CliResult tp = run_zenith(args("full", "tp") + " --tensor-parallel 2 --nproc 2");
  ASSERT_EQ(tp.code, 0) << tp.output;
  EXPECT_NE(tp.output.find("rank 0: tensor 2 x pipeline 1 x data 1 (tensor rank 0, stage 0"),
            std::string::npos)
      << tp.output;
  expect_as("single", "tp", "model.safetensors", 1e-4, 20);
  CliResult pp =
      run_zenith(args("full", "pp") + " --pipeline-parallel 2 --micro-batches 2 --nproc 2");
  ASSERT_EQ(pp.code, 0) << pp.output;
  expect_as("single", "pp", "model.safetensors", 1e-4, 20);
  // The written model reads back as any checkpoint: a one-process run starts from it.
  CliResult again =
      run_zenith("finetune --model " + (root_ / "tp").string() + " --data " +
                 (root_ / "train.jsonl").string() +
                 " --method full --max-steps 1 --batch-size 4 --out " + (root_ / "again").string());
  EXPECT_EQ(again.code, 0) << again.output;
}

TEST_F(FinetuneModelParallel, LoraWithTensorParallelSavesOneProcessAdapter) {
  CliResult single = run_zenith(args("lora", "single"));
  ASSERT_EQ(single.code, 0) << single.output;
  CliResult tp =
      run_zenith(args("lora", "tp") + " --tensor-parallel 2 --sequence-parallel --nproc 2");
  ASSERT_EQ(tp.code, 0) << tp.output;
  expect_as("single", "tp", "adapter_model.safetensors", 1e-4, 28);
  EXPECT_TRUE(fs::exists(root_ / "tp/adapter_config.json"));
}

TEST_F(FinetuneModelParallel, RefusesWhatItDoesNotTakeByName) {
  const std::pair<const char*, const char*> cases[] = {
      {" --pipeline-parallel 2 --nproc 2 --zero 3",
       "--zero 3 with --pipeline-parallel is not supported"},
      {" --tensor-parallel 2 --nproc 2 --mode graph", "run in --mode pynative, not graph"},
      {" --tensor-parallel 3 --nproc 3", "--tensor-parallel 3 does not divide the model's 4"},
      {" --tensor-parallel 2 --nproc 3", "must divide the ranks"},
      {" --sequence-parallel", "it needs --tensor-parallel > 1"},
      {" --pipeline-parallel 2 --micro-batches 3 --nproc 2",
       "does not divide into --micro-batches"},
  };
  for (const auto& [flags, want] : cases) {
    CliResult r = run_zenith(args("full", "refused") + flags);
    EXPECT_NE(r.code, 0) << flags;
    EXPECT_NE(r.output.find(want), std::string::npos) << flags << "\n" << r.output;
  }
}

}  // namespace
}  // namespace zenith::testing
