// ZeRO over the data dimension of a tensor or pipeline mesh, as a user runs it: `zenith finetune
// --zero 1|2` with --tensor-parallel or --pipeline-parallel on 4 ranks (data 2), each tensor or
// pipeline shard's AdamW states (and at stage 2 its gradients, at stage 3 with tensor
// parallelism its weights too) sharded over its data group,
// against one process with the same global batch: the same losses, gradient norms and eval losses
// (1e-5 relative) and the same model at the end.
#include <gtest/gtest.h>

#include <filesystem>

#include "support/checkpoint_compare.h"
#include "support/finetune_cli_runs.h"
#include "support/run_zenith.h"
#include "support/temp_dir.h"

namespace zenith::testing {
namespace {

namespace fs = std::filesystem;

class FinetuneZeroHybrid : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv("ZENITH_DATA", (root_ / "platform").c_str(), 1);
    write_sequence_data(root_ / "train.jsonl", 16, 5, false);
    write_sequence_data(root_ / "eval.jsonl", 5, 6, false);
  }
  std::string args(const std::string& out, const std::string& method = "full",
                   int steps = 3) const {
    return "finetune --model " + std::string(ZENITH_SOURCE_DIR) +
           "/examples/llm/demo-llama --data " + (root_ / "train.jsonl").string() + " --eval-data " +
           (root_ / "eval.jsonl").string() + " --method " + method +
           " --lora-targets all-linear --lora-dropout 0 --lr 1e-3 --warmup-steps 0 --schedule "
           "constant --max-steps " +
           std::to_string(steps) + " --out " + (root_ / out).string();
  }
  // `got`'s losses, gradient norms and eval losses within 1e-5 of `want`'s, its model within
  // `tolerance` of each weight's largest magnitude: AdamW divides by sqrt(v) + 1e-8, so on
  // near-zero gradients float32 sums in another order move an element by up to lr
  // (docs/model-parallel.md); data 2 x pipeline 2 carries it to 2.8e-4 with or without --zero,
  // as tests/cli/finetune_hybrid_test.cpp's 5e-4 allows.
  void expect_as(const std::string& want, const std::string& got, double tolerance,
                 const std::string& file = "model.safetensors", int tensors = 20) {
    expect_run_as(root_, want, got, 3, true, file, tolerance, tensors);
  }
  TempDir dir_{"finetune_zero_hybrid"};
  fs::path root_ = dir_.path();
};

// Data 2 x tensor 2 at ZeRO-1 and ZeRO-3 and data 2 x pipeline 2 at ZeRO-2 train as one process
// of the four ranks' batches; ZeRO-3 with pipeline stages is refused by name.
TEST_F(FinetuneZeroHybrid, ZeroOverTheDataGroupMatchesOneProcess) {
  CliResult single = run_zenith(args("single") + " --batch-size 4");
  ASSERT_EQ(single.code, 0) << single.output;
  CliResult tp =
      run_zenith(args("tp_zero1") + " --batch-size 2 --tensor-parallel 2 --nproc 4" + " --zero 1");
  ASSERT_EQ(tp.code, 0) << tp.output;
  EXPECT_NE(tp.output.find("tensor 2 x pipeline 1 x data 2"), std::string::npos) << tp.output;
  EXPECT_NE(tp.output.find("ZeRO stage 1"), std::string::npos) << tp.output;
  expect_as("single", "tp_zero1", 1e-4);
  CliResult pp = run_zenith(args("pp_zero2") + " --batch-size 2 --pipeline-parallel 2" +
                            " --micro-batches 2 --nproc 4 --zero 2");
  ASSERT_EQ(pp.code, 0) << pp.output;
  EXPECT_NE(pp.output.find("tensor 1 x pipeline 2 x data 2"), std::string::npos) << pp.output;
  EXPECT_NE(pp.output.find("ZeRO stage 2"), std::string::npos) << pp.output;
  expect_as("single", "pp_zero2", 5e-4);
  // ZeRO-3 x tensor 2 (FSDP2 + tensor parallel), with and without sequence parallelism: each
  // rank's tensor shards split again over its data group, gathered module by module; the model
  // written whole at the end.
  CliResult three =
      run_zenith(args("tp_zero3") + " --batch-size 2 --tensor-parallel 2 --nproc 4 --zero 3");
  ASSERT_EQ(three.code, 0) << three.output;
  EXPECT_NE(three.output.find("tensor 2 x pipeline 1 x data 2"), std::string::npos) << three.output;
  EXPECT_NE(three.output.find("ZeRO stage 3"), std::string::npos) << three.output;
  expect_as("single", "tp_zero3", 1e-4);
  CliResult sp3 = run_zenith(args("tp_sp_zero3") +
                             " --batch-size 2 --tensor-parallel 2 --sequence-parallel --nproc 4"
                             " --zero 3");
  ASSERT_EQ(sp3.code, 0) << sp3.output;
  expect_as("single", "tp_sp_zero3", 1e-4);
  CliResult pp3 = run_zenith(args("pp_zero3") +
                             " --batch-size 2 --pipeline-parallel 2 --micro-batches 2 --nproc 4"
                             " --zero 3");
  EXPECT_NE(pp3.code, 0);
  EXPECT_NE(pp3.output.find("--zero 3 with --pipeline-parallel is not supported"),
            std::string::npos)
      << pp3.output;
}

// LoRA: the adapters of each tensor shard (split with their base layer) have their AdamW states
// and gradients (at --zero 3 the adapters too) sharded over the data group; the PEFT adapter
// written at the end is one process's.
TEST_F(FinetuneZeroHybrid, LoraAdaptersUnderZeroAndTensorParallelMatchOneProcess) {
  CliResult single = run_zenith(args("single", "lora") + " --batch-size 4");
  ASSERT_EQ(single.code, 0) << single.output;
  CliResult tp = run_zenith(args("tp_zero2", "lora") +
                            " --batch-size 2 --tensor-parallel 2 --nproc 4 --zero 2");
  ASSERT_EQ(tp.code, 0) << tp.output;
  EXPECT_NE(tp.output.find("ZeRO stage 2"), std::string::npos) << tp.output;
  expect_as("single", "tp_zero2", 1e-4, "adapter_model.safetensors", 28);
  // ZeRO-3: the adapters gathered per layer over the data group too, the frozen base's tensor
  // shards whole on each rank.
  CliResult three = run_zenith(args("tp_zero3", "lora") +
                               " --batch-size 2 --tensor-parallel 2 --nproc 4 --zero 3");
  ASSERT_EQ(three.code, 0) << three.output;
  EXPECT_NE(three.output.find("ZeRO stage 3"), std::string::npos) << three.output;
  expect_as("single", "tp_zero3", 1e-4, "adapter_model.safetensors", 28);
}

// A data 2 x tensor 2 --zero 2 run's checkpoint (each AdamW slot's rows of every rank's tensor
// block, with global offsets, in checkpoint-2/parallel) resumes as data 2 x pipeline 2 at --zero 1,
// and as data 2 x tensor 2 at --zero 3, and ends where the uninterrupted run did.
TEST_F(FinetuneZeroHybrid, ZeroCheckpointResumesUnderAnotherLayout) {
  CliResult whole =
      run_zenith(args("whole", "full", 4) +
                 " --batch-size 2 --tensor-parallel 2 --nproc 4 --zero 2 --save-every 2");
  ASSERT_EQ(whole.code, 0) << whole.output;
  const fs::path checkpoint = root_ / "whole/checkpoint-2";
  ASSERT_TRUE(fs::exists(checkpoint / "parallel/metadata.json")) << whole.output;
  CliResult resumed = run_zenith(args("resumed", "full", 4) +
                                 " --batch-size 2 --pipeline-parallel 2 --micro-batches 2" +
                                 " --nproc 4 --zero 1 --resume " + checkpoint.string());
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  auto want = read_metrics(root_ / "whole/metrics.jsonl");
  auto got = read_metrics(root_ / "resumed/metrics.jsonl");
  ASSERT_EQ(got["loss"].size(), 2u);
  for (const char* name : {"loss", "grad_norm"})
    for (int64_t step : {3, 4})
      EXPECT_NEAR(got[name][step], want[name][step], 1e-5 * std::abs(want[name][step]))
          << name << " step " << step;
  EXPECT_TRUE(same_parameters((root_ / "whole/model.safetensors").string(),
                              (root_ / "resumed/model.safetensors").string(), 5e-4, 20));
  // The same checkpoint at --zero 3 (each rank's rows of its tensor block, weights included).
  CliResult three = run_zenith(args("three", "full", 4) +
                               " --batch-size 2 --tensor-parallel 2 --nproc 4 --zero 3 --resume " +
                               checkpoint.string());
  ASSERT_EQ(three.code, 0) << three.output;
  auto got3 = read_metrics(root_ / "three/metrics.jsonl");
  for (const char* name : {"loss", "grad_norm"})
    for (int64_t step : {3, 4})
      EXPECT_NEAR(got3[name][step], want[name][step], 1e-5 * std::abs(want[name][step]))
          << name << " step " << step;
  EXPECT_TRUE(same_parameters((root_ / "whole/model.safetensors").string(),
                              (root_ / "three/model.safetensors").string(), 1e-4, 20));
}

}  // namespace
}  // namespace zenith::testing
