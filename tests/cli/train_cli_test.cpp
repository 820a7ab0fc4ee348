// `zenith train` / `zenith eval` as a user runs them, on small generated MNIST-format data:
// outputs, YAML configs, exact resumption, and clear errors for bad input that never touch
// an existing checkpoint.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/chrome_trace_check.h"
#include "support/files.h"
#include "support/mnist.h"
#include "support/run_zenith.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;

namespace {

using zenith::testing::CliResult;
using zenith::testing::write_mnist;

CliResult zenith(const std::string& args) { return zenith::testing::run_zenith(args); }

class TrainCli : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = root_ / "mnist";
    write_mnist(data_, "train", 320);
    write_mnist(data_, "t10k", 100);
  }
  std::string train_args(const std::string& out) const {
    return "train --dataset mnist --data-dir " + data_.string() + " --batch-size 32 --out " +
           (root_ / out).string() + " --threads 1 --progress plain --log-every 5";
  }
  zenith::testing::TempDir dir_{"cli"};
  fs::path root_ = dir_.path(), data_;
};

TEST_F(TrainCli, TrainsWritesOutputsAndEvaluates) {
  auto r = zenith(train_args("run") + " --epochs 2");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("final test accuracy"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(") after 2 epochs; "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("epoch 1/2 step 5/10"), std::string::npos) << r.output;
  fs::path out = root_ / "run";
  EXPECT_TRUE(fs::exists(out / "checkpoint_epoch_1.safetensors"));
  EXPECT_TRUE(fs::exists(out / "checkpoint_epoch_2.safetensors"));
  auto log = nlohmann::json::parse(zenith::testing::read_all((out / "eval_log.json").string()));
  EXPECT_EQ(log["status"], "finished");
  EXPECT_EQ(log["history"].size(), 2u);
  EXPECT_GT(log["final"]["Accuracy"].get<double>(), 0.5);  // bands are easy
  EXPECT_TRUE(log["timing"].contains("mean_epoch_seconds"));
  std::istringstream metrics(zenith::testing::read_all((out / "metrics.jsonl").string()));
  std::string line;
  int losses = 0;
  while (std::getline(metrics, line)) losses += nlohmann::json::parse(line)["name"] == "loss";
  EXPECT_EQ(losses, 4);  // steps 5, 10, 15, 20
  int event_files = 0;
  for (auto& e : fs::directory_iterator(out / "summary"))
    event_files += e.path().filename().string().rfind("events.out.tfevents.", 0) == 0;
  EXPECT_EQ(event_files, 1);

  auto e = zenith("eval --model seedcnn --dataset mnist --data-dir " + data_.string() +
                  " --checkpoint " + (out / "checkpoint_epoch_2.safetensors").string());
  ASSERT_EQ(e.code, 0) << e.output;
  auto metrics_json = nlohmann::json::parse(e.output);
  EXPECT_DOUBLE_EQ(metrics_json["Accuracy"].get<double>(), log["final"]["Accuracy"].get<double>());
}

TEST_F(TrainCli, ProfileWritesTraceAndSummaryAndPrintsTheTable) {
  auto r = zenith(train_args("profiled") + " --epochs 1 --profile 3 --profile-skip 2");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("3 steps"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("op (by self time)"), std::string::npos) << r.output;
  const fs::path profile = root_ / "profiled/profile";
  auto trace = nlohmann::json::parse(zenith::testing::read_all((profile / "trace.json").string()));
  EXPECT_EQ(zenith::testing::chrome_trace_problems(trace), std::vector<std::string>{});
  int steps = 0;
  for (const auto& e : trace["traceEvents"]) steps += e["ph"] == "X" && e["cat"] == "step";
  EXPECT_EQ(steps, 3);
  auto summary =
      nlohmann::json::parse(zenith::testing::read_all((profile / "summary.json").string()));
  EXPECT_EQ(summary["steps"], 3);
  // SeedCNN runs two convolutions a step, their FLOPs known from the shapes. (Which op leads the
  // table depends on the machine's load: not checked.)
  const auto& ops = summary["ops"];
  auto conv =
      std::find_if(ops.begin(), ops.end(), [](const auto& o) { return o["name"] == "conv2d"; });
  ASSERT_NE(conv, ops.end()) << ops;
  EXPECT_EQ((*conv)["calls"], 6) << *conv;
  EXPECT_GT((*conv)["gflops_per_second"].get<double>(), 0) << *conv;
  EXPECT_TRUE(fs::exists(profile / "summary.txt"));
  // Off by default: nothing registered, nothing written.
  ASSERT_EQ(zenith(train_args("plain") + " --epochs 1").code, 0);
  EXPECT_FALSE(fs::exists(root_ / "plain/profile"));
  // Graph mode waits 3 steps by default (the capture, the replay that records the memory plan,
  // the arena's first use): a 2-step run ends before profiling; --profile-skip still sets it.
  auto graph =
      zenith(train_args("graph") + " --epochs 1 --limit-train 64 --mode graph --profile 1");
  ASSERT_EQ(graph.code, 0) << graph.output;
  EXPECT_NE(graph.output.find("the run ended after 2 steps, before profiling began (after 3)"),
            std::string::npos)
      << graph.output;
  auto graph_skip =
      zenith(train_args("graph_skip") +
             " --epochs 1 --limit-train 64 --mode graph --profile 1 --profile-skip 1");
  ASSERT_EQ(graph_skip.code, 0) << graph_skip.output;
  EXPECT_NE(graph_skip.output.find("1 steps"), std::string::npos) << graph_skip.output;
  auto bad = zenith(train_args("bad") + " --epochs 1 --profile -1");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.output.find("[profile]"), std::string::npos) << bad.output;
  EXPECT_FALSE(fs::exists(root_ / "bad"));
}

// Hugging Face's rule for --out: a second run into a directory holding files is refused, the
// first run's files untouched; --overwrite-output-dir deletes the run's files first (metrics
// not appended, the user's other files kept).
TEST_F(TrainCli, ANonEmptyOutIsRefusedUnlessOverwritten) {
  const std::string args = train_args("reuse") + " --epochs 1 --limit-train 64";
  ASSERT_EQ(zenith(args).code, 0);
  std::ofstream(root_ / "reuse/notes.txt") << "mine";
  auto losses = [&] {
    std::istringstream metrics(zenith::testing::read_all((root_ / "reuse/metrics.jsonl").string()));
    int n = 0;
    for (std::string line; std::getline(metrics, line);)
      n += nlohmann::json::parse(line)["name"] == "loss";
    return n;
  };
  const int first = losses();
  auto r = zenith(args);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(
      r.output.find("[train] the output directory " + (root_ / "reuse").string() + " is not empty"),
      std::string::npos)
      << r.output;
  r = zenith(args + " --overwrite-output-dir");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(losses(), first);
  EXPECT_TRUE(fs::exists(root_ / "reuse/notes.txt"));
}

// --eval-epochs N evaluates every N epochs; --eval-every, its old name (which counted steps in
// zenith finetune), is an error naming the new one.
TEST_F(TrainCli, EvalEpochs) {
  auto r = zenith(train_args("every2") + " --epochs 2 --limit-train 64 --eval-epochs 2");
  ASSERT_EQ(r.code, 0) << r.output;
  auto history = nlohmann::json::parse(
      zenith::testing::read_all((root_ / "every2/eval_log.json").string()))["history"];
  ASSERT_EQ(history.size(), 2u);
  EXPECT_TRUE(history[0]["eval"].empty());
  EXPECT_FALSE(history[1]["eval"].empty());
  r = zenith(train_args("old") + " --eval-every 1");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("--eval-every was renamed: use --eval-epochs N"), std::string::npos)
      << r.output;
}

TEST_F(TrainCli, ResumeRepeatsTheUninterruptedRun) {
  ASSERT_EQ(zenith(train_args("full") + " --epochs 3").code, 0);
  auto r = zenith("train --resume " + (root_ / "full/checkpoint_epoch_1.safetensors").string() +
                  " --out " + (root_ / "resumed").string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("epochs 2..3"), std::string::npos) << r.output;
  auto eval = [&](const std::string& dir) {
    return zenith("eval --checkpoint " + (root_ / dir / "checkpoint_epoch_3.safetensors").string())
        .output;
  };
  EXPECT_EQ(eval("full"), eval("resumed"));
  auto a = nlohmann::json::parse(
      zenith::testing::read_all((root_ / "full/eval_log.json").string()))["history"];
  auto b = nlohmann::json::parse(
      zenith::testing::read_all((root_ / "resumed/eval_log.json").string()))["history"];
  ASSERT_EQ(b.size(), 3u);  // the resumed log carries the first epoch's record too
  for (int i = 1; i < 3; ++i) EXPECT_EQ(a[i]["train_loss"], b[i]["train_loss"]) << i;
}

TEST_F(TrainCli, YamlConfig) {
  std::string yaml = (root_ / "train.yaml").string();
  std::ofstream(yaml) << "model: lenet\ndataset: mnist\ndata_dir: " << data_.string()
                      << "\nepochs: 1\nbatch_size: 32\nlr: 0.05\nout: " << (root_ / "yaml").string()
                      << "\nprogress: none\n";
  auto r = zenith("train --config " + yaml + " --limit-train 64");
  ASSERT_EQ(r.code, 0) << r.output;
  auto log =
      nlohmann::json::parse(zenith::testing::read_all((root_ / "yaml/eval_log.json").string()));
  EXPECT_EQ(log["config"]["model"], "lenet");
  EXPECT_EQ(log["config"]["lr"], 0.05);
  EXPECT_EQ(log["config"]["limit-train"], 64);  // flags override the file
  std::ofstream(yaml) << "modle: lenet\n";
  r = zenith("train --config " + yaml);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("unknown setting 'modle' (known: model, dataset"), std::string::npos)
      << r.output;
}

// --nesterov and --label-smoothing reach the optimizer and the loss: the same run's first-epoch
// loss changes, and both are recorded in the run's settings.
TEST_F(TrainCli, NesterovAndLabelSmoothing) {
  auto first_loss = [&](const std::string& out, const std::string& extra) {
    auto r = zenith(train_args(out) + " --epochs 1 --limit-train 64 " + extra);
    EXPECT_EQ(r.code, 0) << r.output;
    auto log =
        nlohmann::json::parse(zenith::testing::read_all((root_ / out / "eval_log.json").string()));
    return std::pair{log["history"][0]["train_loss"].get<double>(), log["config"]};
  };
  // Each flag alone, so that each must change training by itself: Nesterov's look-ahead moves
  // the second step's weights, and smoothing half the targets raises the loss.
  auto [plain, plain_cfg] = first_loss("plain", "");
  auto [nesterov, nesterov_cfg] = first_loss("nesterov", "--nesterov");
  auto [smooth, cfg] = first_loss("smooth", "--label-smoothing 0.5");
  EXPECT_EQ(plain_cfg["nesterov"], false);
  EXPECT_EQ(nesterov_cfg["nesterov"], true);
  EXPECT_EQ(cfg["label-smoothing"], 0.5);
  EXPECT_GT(std::abs(nesterov - plain), 1e-4) << plain << " vs " << nesterov;
  EXPECT_GT(smooth, plain + 0.01) << plain << " vs " << smooth;
  auto r = zenith(train_args("bad") + " --epochs 1 --label-smoothing 1.5");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("label_smoothing"), std::string::npos) << r.output;
}

// --schedule wsd: the rate stays at --lr until the last --decay-epochs, then falls linearly to 0
// (the rate logged at the end of each epoch is the one of the next step).
TEST_F(TrainCli, WarmupStableDecaySchedule) {
  auto r = zenith(train_args("wsd") + " --epochs 4 --lr 0.02 --schedule wsd --decay-epochs 2");
  ASSERT_EQ(r.code, 0) << r.output;
  auto h = nlohmann::json::parse(
      zenith::testing::read_all((root_ / "wsd/eval_log.json").string()))["history"];
  ASSERT_EQ(h.size(), 4u);
  EXPECT_DOUBLE_EQ(h[0]["learning_rate"].get<double>(), 0.02);
  EXPECT_DOUBLE_EQ(h[1]["learning_rate"].get<double>(), 0.02);  // the decay starts here
  EXPECT_NEAR(h[2]["learning_rate"].get<double>(), 0.01, 1e-12);
  EXPECT_DOUBLE_EQ(h[3]["learning_rate"].get<double>(), 0.0);
  r = zenith(train_args("bad") + " --epochs 2 --schedule wsd --warmup-epochs 2 --decay-epochs 1");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("wsd schedule: warmup-epochs (2) + decay-epochs (1) exceed epochs (2)"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(root_ / "bad"));
}

// --accumulate-steps 2 with batches of 16 trains like batches of 32: the same step count, schedule
// and (to rounding) final loss; the setting is recorded with the run.
TEST_F(TrainCli, AccumulateStepsTrainsLikeTheCombinedBatch) {
  auto r = zenith(train_args("acc") + " --epochs 2 --batch-size 16 --accumulate-steps 2");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("10 steps per epoch (2 batches of 16 per step)"), std::string::npos)
      << r.output;
  ASSERT_EQ(zenith(train_args("plain") + " --epochs 2").code, 0);
  auto acc =
      nlohmann::json::parse(zenith::testing::read_all((root_ / "acc/eval_log.json").string()));
  auto plain =
      nlohmann::json::parse(zenith::testing::read_all((root_ / "plain/eval_log.json").string()));
  EXPECT_EQ(acc["config"]["accumulate-steps"], 2);
  for (int e = 0; e < 2; ++e)
    EXPECT_NEAR(acc["history"][e]["train_loss"].get<double>(),
                plain["history"][e]["train_loss"].get<double>(), 1e-5)
        << "epoch " << e + 1;
  EXPECT_NEAR(acc["final"]["Loss"].get<double>(), plain["final"]["Loss"].get<double>(), 1e-5);
  r = zenith(train_args("bad") + " --epochs 1 --accumulate-steps 0");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("accumulate-steps"), std::string::npos) << r.output;
}

// --image-size resizes any dataset (MindSpore's LeNet recipe resizes MNIST to 32 x 32): the
// network is built for that size, and eval resizes the test images the same way.
TEST_F(TrainCli, ImageSizeResizesAnyDataset) {
  auto r = zenith(train_args("r32") + " --epochs 1 --image-size 32");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("seedcnn(in_channels=1, image_size=32, num_classes=10)"),
            std::string::npos)
      << r.output;
  auto log =
      nlohmann::json::parse(zenith::testing::read_all((root_ / "r32/eval_log.json").string()));
  EXPECT_EQ(log["config"]["image-size"], 32);
  auto e = zenith("eval --dataset mnist --data-dir " + data_.string() + " --checkpoint " +
                  (root_ / "r32/checkpoint_epoch_1.safetensors").string());
  ASSERT_EQ(e.code, 0) << e.output;
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(e.output)["Accuracy"].get<double>(),
                   log["final"]["Accuracy"].get<double>());
  // A 28 x 28 network cannot take the checkpoint of the 32 x 32 one.
  e = zenith("eval --dataset mnist --data-dir " + data_.string() + " --image-size 28 " +
             "--checkpoint " + (root_ / "r32/checkpoint_epoch_1.safetensors").string());
  EXPECT_NE(e.code, 0);
  EXPECT_NE(e.output.find("7.weight"), std::string::npos) << e.output;
}

TEST_F(TrainCli, BadInputIsAClearErrorAndWritesNothing) {
  auto r = zenith(train_args("x") + " --model resnet50");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("unknown model 'resnet50'; known models: seedcnn, lenet, resnet18"),
            std::string::npos)
      << r.output;
  r = zenith(train_args("x") + " --dataset cifar100");
  EXPECT_NE(r.output.find("unknown dataset 'cifar100' (known: fashion-mnist, mnist, cifar10, "
                          "image-folder)"),
            std::string::npos)
      << r.output;
  r = zenith("train --dataset fashion-mnist --data-dir /nonexistent/fmnist --out " +
             (root_ / "x").string());
  EXPECT_NE(r.output.find("/nonexistent/fmnist: no such directory"), std::string::npos);
  EXPECT_NE(r.output.find("dataset-fashion-mnist"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(root_ / "x"));

  write_mnist(root_ / "bad", "train", 20, {.magic = 0x802});
  write_mnist(root_ / "bad", "t10k", 20);
  r = zenith("train --dataset mnist --data-dir " + (root_ / "bad").string());
  EXPECT_NE(r.output.find("[idx] " + (root_ / "bad/train-images-idx3-ubyte").string() +
                          ": bad magic 0x00000802 at offset 0, expected 0x00000803"),
            std::string::npos)
      << r.output;
  write_mnist(root_ / "bad", "train", 20);
  fs::resize_file(root_ / "bad/train-images-idx3-ubyte", 16 + 28 * 28 * 20 - 5);
  r = zenith("train --dataset mnist --data-dir " + (root_ / "bad").string());
  EXPECT_NE(r.output.find("train-images-idx3-ubyte: truncated at offset 15691"), std::string::npos)
      << r.output;
  EXPECT_FALSE(r.output.find("Segmentation") != std::string::npos);
}

TEST_F(TrainCli, MismatchedCheckpointListsTensorsAndIsNotOverwritten) {
  ASSERT_EQ(zenith(train_args("run") + " --epochs 1 --limit-train 64").code, 0);
  std::string ckpt = (root_ / "run/checkpoint_epoch_1.safetensors").string();
  std::string before = zenith::testing::read_all(ckpt);
  auto r = zenith("eval --model lenet --checkpoint " + ckpt);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("does not fit the model (the checkpoint is a 'seedcnn("),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("conv1.weight [6, 1, 5, 5]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("7.weight [10, 1600]"), std::string::npos) << r.output;
  // Resuming into the same directory with another architecture fails before writing.
  r = zenith("train --resume " + ckpt + " --model lenet --epochs 3");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("does not fit the model"), std::string::npos) << r.output;
  EXPECT_EQ(zenith::testing::read_all(ckpt), before);
  EXPECT_FALSE(fs::exists(root_ / "run/checkpoint_epoch_2.safetensors"));
  // A corrupt checkpoint names the file.
  std::ofstream(ckpt, std::ios::binary) << before.substr(0, 100);
  r = zenith("eval --model seedcnn --dataset mnist --data-dir " + data_.string() +
             " --checkpoint " + ckpt);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("[safetensors] " + ckpt), std::string::npos) << r.output;
}

}  // namespace
