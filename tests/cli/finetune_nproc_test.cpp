// `zenith finetune --nproc N` and a job YAML with `npu: 2` as a user runs them: 2 ranks with
// --batch-size 4 train as one process with --batch-size 8 (losses, gradient norms, eval loss and
// the LoRA adapter), only rank 0 writes, and a 2-rank run resumed from its checkpoint ends where
// the uninterrupted one did.
#include <gtest/gtest.h>

#include <cstdlib>
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

class FinetuneNproc : public ::testing::Test {
 protected:
  void SetUp() override {
    // 20 examples, micro-batches of 8: the third has 4, all of them rank 0's.
    write_sequence_data(root_ / "train.jsonl", 20, 11, true);
    write_sequence_data(root_ / "eval.jsonl", 9, 12, true);
    ::setenv("ZENITH_DATA", (root_ / "platform").c_str(), 1);  // the job's logs
  }
  std::string args(const std::string& out, int batch) const {
    return "finetune --model " + std::string(ZENITH_SOURCE_DIR) +
           "/examples/llm/demo-llama --data " + (root_ / "train.jsonl").string() + " --eval-data " +
           (root_ / "eval.jsonl").string() +
           " --lora-targets all-linear --lora-dropout 0 --lr 1e-3 --warmup-steps 0 "
           "--schedule constant --batch-size " +
           std::to_string(batch) + " --out " + (root_ / out).string();
  }
  TempDir dir_{"finetune_nproc"};
  fs::path root_ = dir_.path();
};

TEST_F(FinetuneNproc, TwoRanksMatchOneProcessWithTheCombinedBatch) {
  CliResult single = run_zenith(args("single", 8) + " --max-steps 4");
  ASSERT_EQ(single.code, 0) << single.output;
  CliResult ddp = run_zenith(args("ddp", 4) + " --max-steps 4 --nproc 2");
  ASSERT_EQ(ddp.code, 0) << ddp.output;
  EXPECT_NE(ddp.output.find("rank 1 of 2: 4 examples of each micro-batch of 8; rank 0 writes"),
            std::string::npos)
      << ddp.output;
  // The same as a platform job of 2 devices (zenith run; zenith submit runs it alike).
  std::ofstream(root_ / "job.yaml") << "job:\n  name: finetune-2-ranks\n  framework: zenith\n"
                                       "  resources: { npu: 2 }\n  entry: "
                                    << ZENITH_BINARY << " " << args("job", 4) << " --max-steps 4\n";
  CliResult job = run_zenith("run " + (root_ / "job.yaml").string());
  ASSERT_EQ(job.code, 0) << job.output;
  EXPECT_NE(job.output.find("rank 1 of 2"), std::string::npos) << job.output;
  EXPECT_TRUE(same_parameters((root_ / "ddp/adapter_model.safetensors").string(),
                              (root_ / "job/adapter_model.safetensors").string(), 1e-5, 28));

  auto a = read_metrics(root_ / "single/metrics.jsonl"),
       b = read_metrics(root_ / "job/metrics.jsonl");
  for (const char* name : {"loss", "grad_norm"}) {
    ASSERT_EQ(a[name].size(), 4u) << name;
    ASSERT_EQ(b[name].size(), 4u) << name << ": rank 0 alone writes metrics.jsonl";
    for (const auto& [step, value] : a[name])
      EXPECT_NEAR(b[name][step], value, 1e-5 * value) << name << " at step " << step;
  }
  auto nproc = read_metrics(root_ / "ddp/metrics.jsonl");
  ASSERT_EQ(nproc["loss"].size(), 4u);
  for (const auto& [step, value] : nproc["loss"])
    EXPECT_NEAR(value, a["loss"][step], 1e-5 * value) << "--nproc 2, step " << step;
  auto eval_a = nlohmann::json::parse(std::ifstream(root_ / "single/eval_log.json"));
  auto eval_b = nlohmann::json::parse(std::ifstream(root_ / "ddp/eval_log.json"));
  ASSERT_EQ(eval_b.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(eval_b[i]["tokens"], eval_a[i]["tokens"]) << "the ranks' shards add up";
    EXPECT_NEAR(eval_b[i]["eval_loss"].get<double>(), eval_a[i]["eval_loss"].get<double>(),
                1e-5 * eval_a[i]["eval_loss"].get<double>());
  }
  // The adapters (q, k, v, o, gate, up, down in 2 layers, A and B each) to 1e-5, as the issue
  // asks: their gradients are summed in float64 over the rows (train/finetune_ranks.h, checked
  // bit for bit by Float64Gradients.RowsSplitAcrossRanksRoundToTheSameFloat32) and every part of
  // the loss carries the same 1 / targets, so the ranks' halves add up to one process's float32
  // gradients. AdamW magnifies what float32 rounding is left where a gradient is near zero, by
  // up to lr per element: the activations themselves, since oneDNN's sgemm rounds a row by where
  // it falls in the product's last block of rows (on AVX2 a row of a 56-row product differs from
  // the same row in 112 rows). Measured on an AVX2 host: 1.3e-5 at lr 1e-2 (0 on AVX-512 hosts,
  // 7.8e-5 there with float32 sums), 2.9e-6 at this lr, 1e-3.
  EXPECT_TRUE(same_parameters((root_ / "single/adapter_model.safetensors").string(),
                              (root_ / "ddp/adapter_model.safetensors").string(), 1e-5, 28));
}

// Full fine-tuning: every weight's gradient is a float32 sum (only adapters get the float64
// sums), so 2 ranks equal one process to float32 rounding as AdamW carries it: at lr 1e-3 the
// largest relative difference was 4.5e-6 (the tied embedding), at lr 1e-2 3.8e-5.
TEST_F(FinetuneNproc, FullFineTuningTwoRanksMatchOneProcess) {
  const std::string full = "finetune --model " + std::string(ZENITH_SOURCE_DIR) +
                           "/examples/llm/demo-llama --data " + (root_ / "train.jsonl").string() +
                           " --method full --lr 1e-3 --warmup-steps 0 --schedule constant "
                           "--max-steps 4 --out ";
  CliResult single = run_zenith(full + (root_ / "full1").string() + " --batch-size 8");
  ASSERT_EQ(single.code, 0) << single.output;
  CliResult ddp = run_zenith(full + (root_ / "full2").string() + " --batch-size 4 --nproc 2");
  ASSERT_EQ(ddp.code, 0) << ddp.output;
  auto a = read_metrics(root_ / "full1/metrics.jsonl"),
       b = read_metrics(root_ / "full2/metrics.jsonl");
  ASSERT_EQ(a["loss"].size(), 4u);
  for (const auto& [step, value] : a["loss"])
    EXPECT_NEAR(b["loss"][step], value, 1e-5 * value) << "step " << step;
  // Embedding (tied head), 2 layers x 9, final norm.
  EXPECT_TRUE(same_parameters((root_ / "full1/model.safetensors").string(),
                              (root_ / "full2/model.safetensors").string(), 1e-5, 20));
}

TEST_F(FinetuneNproc, TwoRanksResumeWhereTheyLeftOff) {
  CliResult whole = run_zenith(args("whole", 4) + " --max-steps 5 --save-every 2 --nproc 2");
  ASSERT_EQ(whole.code, 0) << whole.output;
  ASSERT_TRUE(fs::exists(root_ / "whole/checkpoint-4/trainer_state.safetensors"));
  CliResult resumed = run_zenith(args("resumed", 4) + " --max-steps 5 --nproc 2 --resume " +
                                 (root_ / "whole/checkpoint-2").string());
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from"), std::string::npos) << resumed.output;
  EXPECT_TRUE(same_parameters((root_ / "whole/adapter_model.safetensors").string(),
                              (root_ / "resumed/adapter_model.safetensors").string(), 1e-12, 28));
  // Resuming with another number of ranks changes the run: refused, naming the setting.
  CliResult other = run_zenith(args("other", 4) + " --max-steps 5 --resume " +
                               (root_ / "whole/checkpoint-2").string());
  EXPECT_NE(other.code, 0);
  EXPECT_NE(other.output.find("ranks: 1 (the checkpoint's: 2)"), std::string::npos) << other.output;
}

// A job of 2 ranks that the platform restarts (max_restarts) resumes from its newest
// checkpoint-<step>/ and repeats the steps after it exactly. The first attempt fails after
// finishing (the entry's exit code), so both attempts' steps are in metrics.jsonl.
TEST_F(FinetuneNproc, ARestartedJobResumesFromItsNewestCheckpoint) {
  std::ofstream(root_ / "job.yaml")
      << "job:\n  name: finetune-restart\n  resources: { npu: 2 }\n  max_restarts: 1\n"
         "  entry: "
      << ZENITH_BINARY << " " << args("out", 4)
      << " --max-steps 5 --save-every 2; [ \"$ZENITH_RESTART_COUNT\" = 1 ]\n";
  CliResult job = run_zenith("run " + (root_ / "job.yaml").string());
  ASSERT_EQ(job.code, 0) << job.output;
  EXPECT_NE(job.output.find("restart 1: resuming from " + (root_ / "out/checkpoint-4").string()),
            std::string::npos)
      << job.output;
  EXPECT_NE(job.output.find("at step 4"), std::string::npos) << job.output;
  std::vector<double> step5;
  std::ifstream in(root_ / "out/metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    nlohmann::json j = nlohmann::json::parse(line);
    if (j["name"] == "loss" && j["step"] == 5) step5.push_back(j["value"].get<double>());
  }
  ASSERT_EQ(step5.size(), 2u) << "step 5 of each attempt";
  EXPECT_EQ(step5[0], step5[1]);
}

// --zero 1 and 2 (AdamW's states, then the gradients too, sharded over the ranks) train as DDP
// does: the same losses and gradient norms, the same weights to float32 rounding (the ring's
// sums against the direct ones: 4.4e-7 measured). Micro-batches where rank 1 has no examples
// run no backward there: ZeRO reduces at the step.
TEST_F(FinetuneNproc, ZeroStagesOneAndTwoTrainAsDdp) {
  const std::string full = "finetune --model " + std::string(ZENITH_SOURCE_DIR) +
                           "/examples/llm/demo-llama --data " + (root_ / "train.jsonl").string() +
                           " --method full --lr 1e-3 --warmup-steps 0 --schedule constant "
                           "--max-steps 4 --batch-size 4 --nproc 2 --out ";
  CliResult ddp = run_zenith(full + (root_ / "ddp").string());
  ASSERT_EQ(ddp.code, 0) << ddp.output;
  auto want = read_metrics(root_ / "ddp/metrics.jsonl");
  for (const char* stage : {"1", "2"}) {
    const fs::path out = root_ / (std::string("zero") + stage);
    CliResult zero = run_zenith(full + out.string() + " --zero " + stage);
    ASSERT_EQ(zero.code, 0) << zero.output;
    EXPECT_NE(zero.output.find(std::string("rank 1: ZeRO stage ") + stage), std::string::npos)
        << zero.output;
    auto got = read_metrics(out / "metrics.jsonl");
    ASSERT_EQ(got["loss"].size(), 4u);
    for (const char* name : {"loss", "grad_norm"})
      for (const auto& [step, value] : want[name])
        EXPECT_NEAR(got[name][step], value, 1e-6 * value) << name << " step " << step;
    EXPECT_TRUE(same_parameters((root_ / "ddp/model.safetensors").string(),
                                (out / "model.safetensors").string(), 1e-6, 20));
  }
  // LoRA under ZeRO: tests/cli/finetune_hybrid_test.cpp. Stage 3 recomputes layers in backward.
  CliResult lora =
      run_zenith(args("lora", 4) + " --max-steps 1 --nproc 2 --zero 3 --lora-dropout 0.1");
  EXPECT_NE(lora.code, 0);
  EXPECT_NE(lora.output.find("it needs --lora-dropout 0, got 0.1"), std::string::npos)
      << lora.output;
}

// --zero 3 (parameters sharded too, gathered around each decoder layer's forward and again in
// its backward) trains as DDP does: losses, gradient norms, eval loss (each layer gathered in
// turn, as in training) and the unsharded model written at the end. The third micro-batch has
// no example for rank 1, which runs a stand-in that counts for nothing so that its gathers
// match rank 0's.
TEST_F(FinetuneNproc, ZeroStageThreeTrainsAsDdp) {
  const std::string full = "finetune --model " + std::string(ZENITH_SOURCE_DIR) +
                           "/examples/llm/demo-llama --data " + (root_ / "train.jsonl").string() +
                           " --eval-data " + (root_ / "eval.jsonl").string() +
                           " --method full --lr 1e-3 --warmup-steps 0 --schedule constant "
                           "--max-steps 3 --batch-size 4 --nproc 2 --out ";
  CliResult ddp = run_zenith(full + (root_ / "ddp").string());
  ASSERT_EQ(ddp.code, 0) << ddp.output;
  CliResult zero = run_zenith(full + (root_ / "zero3").string() + " --zero 3");
  ASSERT_EQ(zero.code, 0) << zero.output;
  EXPECT_NE(zero.output.find("rank 1: ZeRO stage 3 over 2 ranks, parameters (gathered per layer)"),
            std::string::npos)
      << zero.output;
  auto want = read_metrics(root_ / "ddp/metrics.jsonl");
  auto got = read_metrics(root_ / "zero3/metrics.jsonl");
  ASSERT_EQ(got["loss"].size(), 3u);
  for (const char* name : {"loss", "grad_norm", "eval/loss"})
    for (const auto& [step, value] : want[name])
      EXPECT_NEAR(got[name][step], value, 1e-5 * value) << name << " step " << step;
  EXPECT_TRUE(same_parameters((root_ / "ddp/model.safetensors").string(),
                              (root_ / "zero3/model.safetensors").string(), 1e-5, 20));
  CliResult amp = run_zenith(full + (root_ / "amp").string() + " --zero 3 --amp O1");
  EXPECT_NE(amp.code, 0);
  EXPECT_NE(amp.output.find("--zero 3 trains float32 weights"), std::string::npos) << amp.output;
}

// A --zero run's checkpoint holds each rank's optimizer rows (checkpoint-N/zero: the pieces with
// their global offsets and a metadata file): resumed on the same 2 ranks it ends where the
// uninterrupted run did, and on 4 ranks with the same global batch (4 x 2 for 2 x 4) its next
// step has the uninterrupted run's loss. Resuming it without --zero is refused by name.
TEST_F(FinetuneNproc, ZeroCheckpointsResumeOnAnotherRankCount) {
  const std::string base = "finetune --model " + std::string(ZENITH_SOURCE_DIR) +
                           "/examples/llm/demo-llama --data " + (root_ / "train.jsonl").string() +
                           " --method full --lr 1e-3 --warmup-steps 0 --schedule constant "
                           "--max-steps 3 --out ";
  CliResult whole = run_zenith(base + (root_ / "whole").string() +
                               " --zero 3 --batch-size 4 --nproc 2 --save-every 2");
  ASSERT_EQ(whole.code, 0) << whole.output;
  const fs::path checkpoint = root_ / "whole/checkpoint-2";
  EXPECT_TRUE(fs::exists(checkpoint / "zero/metadata.json"));
  EXPECT_TRUE(fs::exists(checkpoint / "zero/shard-1.safetensors"));
  auto want = read_metrics(root_ / "whole/metrics.jsonl");
  for (const auto& [ranks, batch] : {std::pair{2, 4}, std::pair{4, 2}}) {
    const fs::path out = root_ / ("resumed" + std::to_string(ranks));
    CliResult resumed =
        run_zenith(base + out.string() + " --zero 3 --batch-size " + std::to_string(batch) +
                   " --nproc " + std::to_string(ranks) + " --resume " + checkpoint.string());
    ASSERT_EQ(resumed.code, 0) << resumed.output;
    auto got = read_metrics(out / "metrics.jsonl");
    ASSERT_EQ(got["loss"].count(3), 1u) << resumed.output;
    EXPECT_NEAR(got["loss"][3], want["loss"][3], 1e-5 * want["loss"][3]) << ranks << " ranks";
  }
  EXPECT_TRUE(same_parameters((root_ / "whole/model.safetensors").string(),
                              (root_ / "resumed2/model.safetensors").string(), 1e-6, 20));
  CliResult plain = run_zenith(base + (root_ / "plain").string() +
                               " --batch-size 4 --nproc 2 --resume " + checkpoint.string());
  EXPECT_NE(plain.code, 0);
  EXPECT_NE(plain.output.find("was written by a --zero run"), std::string::npos) << plain.output;
}

// MindFormers' parallel_config block in --config: optimizer_shard is --zero 1 over the
// data_parallel ranks; a data_parallel that is not the job's ranks and a key zenith does not
// read are refused by name.
TEST_F(FinetuneNproc, ParallelConfigBlockMeansTheFlags) {
  const std::string run = "finetune --model " + std::string(ZENITH_SOURCE_DIR) +
                          "/examples/llm/demo-llama --data " + (root_ / "train.jsonl").string() +
                          " --method full --max-steps 1 --batch-size 4 --nproc 2 --config ";
  auto config = [&](const std::string& name, const std::string& block) {
    const fs::path path = root_ / (name + ".yaml");
    std::ofstream(path) << "finetune:\n  lr: 0.001\n  parallel_config:\n" << block;
    return path.string() + " --out " + (root_ / name).string();
  };
  CliResult sharded =
      run_zenith(run + config("sharded", "    data_parallel: 2\n    optimizer_shard: true\n"));
  ASSERT_EQ(sharded.code, 0) << sharded.output;
  EXPECT_NE(sharded.output.find("rank 1: ZeRO stage 1 over 2 ranks"), std::string::npos)
      << sharded.output;
  CliResult wrong = run_zenith(run + config("wrong", "    data_parallel: 3\n"));
  EXPECT_NE(wrong.code, 0);
  EXPECT_NE(wrong.output.find("parallel_config: data_parallel 3 x model_parallel 1 x "
                              "pipeline_stage 1 is 3 ranks; the job has 2"),
            std::string::npos)
      << wrong.output;
  CliResult unknown = run_zenith(run + config("unknown", "    expert_parallel: 2\n"));
  EXPECT_NE(unknown.code, 0);
  EXPECT_NE(unknown.output.find("parallel_config.expert_parallel is not supported"),
            std::string::npos)
      << unknown.output;
}

}  // namespace
}  // namespace zenith::testing
