// `zenith train --nproc N` as a user runs it: N ranks with --batch-size b end with the same
// parameters as one process with --batch-size N*b (the acceptance criterion of data-parallel
// training, through the platform and the real command), and only rank 0 writes.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "support/checkpoint_compare.h"
#include "support/chrome_trace_check.h"
#include "support/mnist.h"
#include "support/run_zenith.h"
#include "support/temp_dir.h"
#include "zenith/io.h"

namespace fs = std::filesystem;

namespace {

using zenith::testing::CliResult;

CliResult zenith(const std::string& args) { return zenith::testing::run_zenith(args); }

// Class c is a bright band at rows 2c..2c+3, with noise.
void write_mnist(const fs::path& dir, const std::string& prefix, int n) {
  zenith::testing::write_mnist(dir, prefix, n,
                               {.seed = 777, .band = 150, .noise_shift = 26, .label_step = 3});
}

class TrainNproc : public ::testing::Test {
 protected:
  void SetUp() override {
    write_mnist(root_ / "mnist", "train", 640);
    write_mnist(root_ / "mnist", "t10k", 90);
    ::setenv("ZENITH_DATA", (root_ / "platform").c_str(), 1);  // the job's logs
  }
  // 20 steps of SeedCNN with the global batch 32, momentum SGD.
  std::string args(const std::string& out, int batch) const {
    return "train --model seedcnn --dataset mnist --data-dir " + (root_ / "mnist").string() +
           " --epochs 1 --lr 0.05 --threads 1 --progress plain --log-every 5 --batch-size " +
           std::to_string(batch) + " --out " + (root_ / out).string();
  }
  zenith::testing::TempDir dir_{"nproc"};
  fs::path root_ = dir_.path();
};

TEST_F(TrainNproc, RanksMatchOneProcessWithTheCombinedBatch) {
  auto single = zenith(args("single", 32));
  ASSERT_EQ(single.code, 0) << single.output;
  for (int n : {2, 4}) {
    std::string out = "ddp" + std::to_string(n);
    auto r = zenith(args(out, 32 / n) + " --nproc " + std::to_string(n));
    ASSERT_EQ(r.code, 0) << r.output;
    EXPECT_NE(r.output.find("rank " + std::to_string(n - 1) + " of " + std::to_string(n)),
              std::string::npos)
        << r.output;
    // SeedCNN: two convs without bias, the dense weight and bias.
    EXPECT_TRUE(zenith::testing::same_parameters(
        (root_ / "single/checkpoint_epoch_1.safetensors").string(),
        (root_ / out / "checkpoint_epoch_1.safetensors").string(), 1e-5, 4))
        << n << " ranks";
    auto meta = zenith::io::read_safetensors_metadata(
        (root_ / out / "checkpoint_epoch_1.safetensors").string());
    EXPECT_EQ(meta["step"], "20") << n << " ranks";  // 640 samples / (n ranks * 32/n)
    // Evaluation over shards is reduced to the whole test set's figures.
    auto log_a = nlohmann::json::parse(std::ifstream(root_ / "single/eval_log.json"));
    auto log_b = nlohmann::json::parse(std::ifstream(root_ / out / "eval_log.json"));
    EXPECT_NEAR(log_a["final"]["Accuracy"].get<double>(), log_b["final"]["Accuracy"].get<double>(),
                1e-9);
    EXPECT_NEAR(log_a["final"]["Loss"].get<double>(), log_b["final"]["Loss"].get<double>(), 1e-4);
    EXPECT_EQ(log_b["timing"]["ranks"], n);
  }
}

TEST_F(TrainNproc, ProfileMergesTheRanksTracesAndReachesTheJobDir) {
  auto r = zenith(args("profiled", 16) + " --nproc 2 --profile 4");
  ASSERT_EQ(r.code, 0) << r.output;
  const fs::path profile = root_ / "profiled/profile";
  for (const char* f : {"trace.rank0.json", "trace.rank1.json", "summary.rank1.json"})
    EXPECT_TRUE(fs::exists(profile / f)) << f;
  auto trace = nlohmann::json::parse(std::ifstream(profile / "trace.json"));
  EXPECT_EQ(zenith::testing::chrome_trace_problems(trace), std::vector<std::string>{});
  std::map<int, int> steps_per_rank;
  int waits = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && e["cat"] == "step") steps_per_rank[e["pid"].get<int>()] += 1;
    waits += e["ph"] == "X" && e["name"] == "communication wait";
  }
  EXPECT_EQ(steps_per_rank, (std::map<int, int>{{0, 4}, {1, 4}}));
  EXPECT_GE(waits, 8);  // each step waits for its gradients (and its loss) on both ranks
  auto summary = nlohmann::json::parse(std::ifstream(profile / "summary.json"));
  ASSERT_EQ(summary["ranks"].size(), 2u);
  EXPECT_EQ(summary["ranks"][1]["rank"], 1);
  // The job dir's copy (ZENITH_DATA/runs/<id>/profile under --nproc), as the dashboard reads it.
  int copies = 0;
  for (const auto& job : fs::directory_iterator(root_ / "platform/runs"))
    copies +=
        fs::exists(job.path() / "profile/trace.json") &&
        fs::file_size(job.path() / "profile/trace.json") == fs::file_size(profile / "trace.json");
  EXPECT_EQ(copies, 1);
}

}  // namespace
