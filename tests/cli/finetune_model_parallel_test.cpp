// `zenith finetune --tensor-parallel / --pipeline-parallel --nproc N` as a user runs it: the
// same losses and gradient norms as one process with the same batch (the ranks of a tensor or
// pipeline group see the same rows), the whole model and the PEFT adapter written at the end as
// one process writes them, and the combinations it does not take refused by name.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "support/checkpoint_compare.h"
#include "support/run_zenith.h"
#include "support/temp_dir.h"

namespace zenith::testing {
namespace {

namespace fs = std::filesystem;

// Sequences of one length (ParallelLlama's loss is the mean of its micro-batches' means: one
// process's when each holds as many learned labels), later tokens following from the first.
void write_data(const fs::path& path, int count) {
  std::ofstream out(path);
  uint64_t s = 5;
  for (int i = 0; i < count; ++i) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    nlohmann::json ids = nlohmann::json::array(), labels = nlohmann::json::array();
    for (int t = 0, id = 3 + int((s >> 20) % 500); t < 12; ++t, ++id) {
      ids.push_back(id);
      labels.push_back(t < 2 ? -100 : id);
    }
    out << nlohmann::json{{"input_ids", ids}, {"labels", labels}}.dump() << "\n";
  }
}

std::map<std::string, std::map<int64_t, double>> read_metrics(const fs::path& file) {
  std::map<std::string, std::map<int64_t, double>> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    nlohmann::json j = nlohmann::json::parse(line);
    out[j["name"]][j["step"].get<int64_t>()] = j["value"].get<double>();
  }
  return out;
}

class FinetuneModelParallel : public ::testing::Test {
 protected:
  void SetUp() override {
    write_data(root_ / "train.jsonl", 16);
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
    auto a = read_metrics(root_ / want / "metrics.jsonl");
    auto b = read_metrics(root_ / got / "metrics.jsonl");
    ASSERT_EQ(b["loss"].size(), 3u) << got;
    for (const char* name : {"loss", "grad_norm"})
      for (const auto& [step, value] : a[name])
        EXPECT_NEAR(b[name][step], value, 1e-5 * std::abs(value))
            << got << " " << name << " step " << step;
    EXPECT_TRUE(same_parameters((root_ / want / file).string(), (root_ / got / file).string(),
                                tolerance, tensors))
        << got;
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
      {" --tensor-parallel 2 --nproc 2 --zero 3", "--zero 3 with --tensor-parallel"},
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
