// Model.train / fit / eval / predict on a small synthetic problem, the callbacks, the NaN
// guard, and exact resumption from epoch and step checkpoints.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/op_check.h"
#include "support/temp_dir.h"
#include "zenith/context.h"
#include "zenith/train.h"

namespace fs = std::filesystem;
namespace zt = zenith::testing;
using zenith::Model;
using zenith::Tensor;
namespace dataset = zenith::dataset;
namespace nn = zenith::nn;
namespace cb = zenith::callbacks;

namespace {

using zenith::testing::TempDir;

// Three Gaussian blobs in 4-d: an easy 3-class problem.
dataset::Dataset blobs(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise(0.0, 0.5);
  std::vector<double> x, y;
  for (int64_t i = 0; i < n; ++i) {
    int64_t c = i % 3;
    for (int64_t d = 0; d < 4; ++d) x.push_back((d == c ? 2.0 : 0.0) + noise(rng));
    y.push_back(double(c));
  }
  return dataset::TensorDataset({Tensor::from_vector(x, {n, 4}, zenith::DType::f32),
                                 Tensor::from_vector(y, {n}, zenith::DType::i64)},
                                {"x", "label"});
}

struct Parts {
  nn::CellPtr net;
  nn::LossPtr loss;
  nn::OptimizerPtr opt;
};

Parts make_parts(double lr = 0.1, uint64_t seed = 42) {
  zenith::manual_seed(seed);
  Parts p;
  p.net = nn::SequentialCell({nn::Dense(4, 16), nn::ReLU(), nn::Dropout(0.2), nn::Dense(16, 3)});
  p.loss = nn::SoftmaxCrossEntropyWithLogits(/*sparse=*/true);
  p.opt = nn::Momentum(p.net->trainable_params(), lr, 0.9);
  return p;
}

// Records every step's loss and the order of callback events.
class Recorder : public cb::Callback {
 public:
  std::vector<double> losses;
  std::vector<std::string> events;
  void on_train_begin(cb::RunContext&) override { events.push_back("train_begin"); }
  void on_train_epoch_begin(cb::RunContext& c) override {
    events.push_back("epoch_begin " + std::to_string(c.epoch));
  }
  void on_train_step_end(cb::RunContext& c) override { losses.push_back(c.loss); }
  void on_eval_end(cb::RunContext& c) override { events.push_back("eval"); }
  void on_train_epoch_end(cb::RunContext& c) override {
    events.push_back("epoch_end " + std::to_string(c.epoch));
  }
  void on_train_end(cb::RunContext&) override { events.push_back("train_end"); }
};

class ModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    threads_ = zenith::context::get_num_threads();
    zenith::context::set_num_threads(1);  // bitwise-reproducible reductions
  }
  void TearDown() override { zenith::context::set_num_threads(threads_); }
  int threads_ = 1;
};

TEST_F(ModelTest, TrainsEvaluatesAndPredicts) {
  auto p = make_parts();
  Model model(p.net, p.loss, p.opt, {{"Accuracy", zenith::metrics::Accuracy()}});
  auto train = blobs(300, 1).shuffle(3).batch(32);
  auto test = blobs(150, 2).batch(50);
  auto before = model.eval(test);
  auto rec = std::make_shared<Recorder>();
  model.fit(5, train, test, /*valid_frequency=*/2, {rec});
  auto after = model.eval(test);
  EXPECT_GT(after.at("Accuracy"), 0.9);
  EXPECT_LT(after.at("Loss"), before.at("Loss"));
  ASSERT_EQ(model.history().size(), 5u);
  EXPECT_LT(model.history().back().loss, model.history().front().loss);
  EXPECT_TRUE(model.history()[1].eval.count("Accuracy"));  // epoch 2
  EXPECT_TRUE(model.history()[2].eval.empty());            // epoch 3
  EXPECT_TRUE(model.history()[4].eval.count("Accuracy"));  // the last epoch
  EXPECT_EQ(rec->losses.size(), 5u * 10u);
  std::vector<std::string> expected_start{"train_begin",   "epoch_begin 1", "epoch_end 1",
                                          "epoch_begin 2", "eval",          "epoch_end 2"};
  EXPECT_EQ(std::vector<std::string>(rec->events.begin(), rec->events.begin() + 6), expected_start);
  EXPECT_EQ(rec->events.back(), "train_end");
  EXPECT_EQ(model.global_step(), 50);

  Tensor out = model.predict(test.get(0)[0]);
  EXPECT_EQ(out.shape(), (zenith::Shape{50, 3}));
  EXPECT_FALSE(out.requires_grad());
  EXPECT_TRUE(p.net->training());  // predict/eval restore the mode
}

TEST_F(ModelTest, ResumeFromEpochCheckpointRepeatsTheLossesExactly) {
  TempDir dir("model");
  auto train = blobs(200, 1).shuffle(5).batch(16);
  auto full = make_parts();
  Model a(full.net, full.loss, full.opt);
  auto rec_a = std::make_shared<Recorder>();
  a.train(4, train, {rec_a, cb::ModelCheckpoint(dir.str())});
  ASSERT_TRUE(fs::exists(dir / "checkpoint_epoch_2.safetensors"));

  // A new process would build the model from another seed; the checkpoint restores it all.
  auto resumed = make_parts(0.1, /*seed=*/999);
  Model b(resumed.net, resumed.loss, resumed.opt);
  auto meta = b.load_checkpoint(dir / "checkpoint_epoch_2.safetensors");
  EXPECT_EQ(meta.at("epoch"), "2");
  EXPECT_EQ(b.epochs_done(), 2);
  ASSERT_EQ(b.history().size(), 2u);
  auto rec_b = std::make_shared<Recorder>();
  b.train(4, train, {rec_b}, false, /*initial_epoch=*/b.epochs_done());
  const size_t steps = 13;
  ASSERT_EQ(rec_b->losses.size(), 2 * steps);
  for (size_t i = 0; i < rec_b->losses.size(); ++i)
    EXPECT_EQ(rec_b->losses[i], rec_a->losses[2 * steps + i]) << "step " << i;
  EXPECT_EQ(b.history().size(), 4u);
  EXPECT_EQ(b.global_step(), a.global_step());
  auto wa = full.net->state_dict(), wb = resumed.net->state_dict();
  for (auto& [name, t] : wa) EXPECT_TRUE(zt::all_close(wb.at(name), t, 0, 0)) << name;
}

TEST_F(ModelTest, ResumeFromStepCheckpointMidEpoch) {
  TempDir dir("model");
  auto train = blobs(200, 1).shuffle(5).batch(16);  // 13 steps per epoch
  auto full = make_parts();
  Model a(full.net, full.loss, full.opt);
  auto rec_a = std::make_shared<Recorder>();
  cb::CheckpointConfig every_20{.save_checkpoint_epochs = 0, .save_checkpoint_steps = 20};
  a.train(3, train, {rec_a, cb::ModelCheckpoint(dir.str(), every_20)});
  ASSERT_TRUE(fs::exists(dir / "checkpoint_step_20.safetensors"));

  auto resumed = make_parts(0.1, 7);
  Model b(resumed.net, resumed.loss, resumed.opt);
  auto meta = b.load_checkpoint(dir / "checkpoint_step_20.safetensors");
  EXPECT_EQ(meta.at("step_in_epoch"), "7");
  auto rec_b = std::make_shared<Recorder>();
  b.train(3, train, {rec_b}, false, b.epochs_done());
  ASSERT_EQ(rec_b->losses.size(), rec_a->losses.size() - 20);
  for (size_t i = 0; i < rec_b->losses.size(); ++i)
    EXPECT_EQ(rec_b->losses[i], rec_a->losses[20 + i]) << "step " << 20 + i;
  EXPECT_DOUBLE_EQ(b.history().back().loss, a.history().back().loss);
}

// Two batches of 16 per step (gradient accumulation) == one batch of 32: the same parameters
// (to rounding), losses, step counts and schedule position; the epoch's last step has a single
// batch of 12 in both runs.
TEST_F(ModelTest, AccumulationEqualsTheCombinedBatch) {
  auto run = [](int64_t batch, int64_t accumulation, std::vector<double>* losses) {
    zenith::manual_seed(42);
    auto net = nn::SequentialCell({nn::Dense(4, 16), nn::ReLU(), nn::Dense(16, 3)});
    auto opt = nn::Momentum(net->trainable_params(), 0.1, 0.9);
    Model model(net, nn::SoftmaxCrossEntropyWithLogits(true), opt);
    model.set_accumulation_steps(accumulation);
    auto train = blobs(300, 1).shuffle(3).batch(batch);
    EXPECT_EQ(model.steps_per_epoch(train), 10);
    auto rec = std::make_shared<Recorder>();
    model.train(2, train, {rec});
    EXPECT_EQ(model.global_step(), 20);
    EXPECT_EQ(opt->step_count(), 20);
    *losses = rec->losses;
    return net->state_dict();
  };
  std::vector<double> la, lb;
  auto a = run(32, 1, &la);
  auto b = run(16, 2, &lb);
  ASSERT_EQ(la.size(), 20u);
  ASSERT_EQ(lb.size(), 20u);
  for (size_t i = 0; i < la.size(); ++i) EXPECT_NEAR(lb[i], la[i], 1e-5) << "step " << i;
  for (auto& [name, t] : a) EXPECT_TRUE(zt::all_close(b.at(name), t, 1e-5, 1e-5)) << name;
}

// A step checkpoint taken mid-epoch under accumulation resumes at the same batch: the losses
// repeat exactly; resuming it with another accumulation count is a clear error.
TEST_F(ModelTest, ResumeMidEpochWithAccumulation) {
  TempDir dir("model");
  auto train = blobs(200, 1).shuffle(5).batch(8);  // 25 batches: 13 steps of 2 per epoch
  auto full = make_parts();
  Model a(full.net, full.loss, full.opt);
  a.set_accumulation_steps(2);
  auto rec_a = std::make_shared<Recorder>();
  cb::CheckpointConfig every_9{.save_checkpoint_epochs = 0, .save_checkpoint_steps = 9};
  a.train(2, train, {rec_a, cb::ModelCheckpoint(dir.str(), every_9)});
  ASSERT_EQ(rec_a->losses.size(), 26u);
  ASSERT_TRUE(fs::exists(dir / "checkpoint_step_18.safetensors"));

  auto resumed = make_parts(0.1, 7);
  Model b(resumed.net, resumed.loss, resumed.opt);
  auto meta = b.load_checkpoint(dir / "checkpoint_step_18.safetensors");
  EXPECT_EQ(meta.at("step_in_epoch"), "5");
  EXPECT_EQ(meta.at("accumulation_steps"), "2");
  EXPECT_TRUE(zt::throws_with([&] { b.train(2, train, {}, false, b.epochs_done()); },
                              "taken mid-epoch with 2 accumulation steps"));
  b.set_accumulation_steps(2);
  auto rec_b = std::make_shared<Recorder>();
  b.train(2, train, {rec_b}, false, b.epochs_done());
  ASSERT_EQ(rec_b->losses.size(), 8u);
  for (size_t i = 0; i < rec_b->losses.size(); ++i)
    EXPECT_EQ(rec_b->losses[i], rec_a->losses[18 + i]) << "step " << 18 + i;
  EXPECT_DOUBLE_EQ(b.history().back().loss, a.history().back().loss);
  EXPECT_TRUE(zt::throws_with([&] { b.set_accumulation_steps(0); }, "must be >= 1"));
}

// Blows the learning rate up from epoch `at` on, so the loss overflows during that epoch.
class Explode : public cb::Callback {
 public:
  explicit Explode(int64_t at) : at_(at) {}
  void on_train_epoch_begin(cb::RunContext& c) override {
    if (c.epoch == at_) c.model->optimizer()->set_lr(nn::constant_lr(1e30));
  }

 private:
  int64_t at_;
};

TEST_F(ModelTest, NanLossStopsAndKeepsTheLastGoodCheckpoint) {
  TempDir dir("model");
  auto p = make_parts();
  Model model(p.net, p.loss, p.opt);
  auto train = blobs(64, 1).batch(16);
  try {
    model.train(5, train, {std::make_shared<Explode>(3), cb::ModelCheckpoint(dir.str())});
    FAIL() << "expected the NaN guard to stop training";
  } catch (const zenith::Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("[train] loss is"), std::string::npos) << msg;
    EXPECT_NE(msg.find("at epoch 3, step"), std::string::npos) << msg;
    EXPECT_NE(msg.find("stopped before applying this step"), std::string::npos) << msg;
    EXPECT_NE(msg.find("The last good checkpoint is " + dir / "checkpoint_epoch_2.safetensors"),
              std::string::npos)
        << msg;
  }
  EXPECT_EQ(model.epochs_done(), 2);
  EXPECT_FALSE(fs::exists(dir / "checkpoint_epoch_3.safetensors"));
  for (auto& [name, t] : zenith::io::load_safetensors(dir / "checkpoint_epoch_2.safetensors"))
    for (double v : t.to_double_vector()) ASSERT_TRUE(std::isfinite(v)) << name;

  auto fresh = make_parts(/*lr=*/1e30);
  Model first_step(fresh.net, fresh.loss, fresh.opt);
  EXPECT_TRUE(zt::throws_with([&] { first_step.train(3, train); },
                              "No checkpoint was written in this run"));
}

TEST_F(ModelTest, EarlyStoppingAndCheckpointRetention) {
  TempDir dir("model");
  auto p = make_parts(/*lr=*/0.0);  // nothing improves
  Model model(p.net, p.loss, p.opt, {{"Accuracy", zenith::metrics::Accuracy()}});
  auto train = blobs(60, 1).batch(20);
  cb::CheckpointConfig keep2{.keep_checkpoint_max = 2};
  model.fit(
      50, train, blobs(30, 2).batch(30), 1,
      {cb::EarlyStopping("eval_loss", /*patience=*/2), cb::ModelCheckpoint(dir.str(), keep2)});
  EXPECT_EQ(model.epochs_done(), 4);  // best at 1, then 3 epochs without improvement
  EXPECT_FALSE(fs::exists(dir / "checkpoint_epoch_2.safetensors"));
  EXPECT_TRUE(fs::exists(dir / "checkpoint_epoch_3.safetensors"));
  EXPECT_TRUE(fs::exists(dir / "checkpoint_epoch_4.safetensors"));
  EXPECT_TRUE(zt::throws_with(
      [&] { model.fit(6, train, blobs(30, 2).batch(30), 1, {cb::EarlyStopping("Acc")}, false, 4); },
      "unknown monitor 'Acc' (known: loss, eval_loss, Accuracy, Loss)"));
}

TEST_F(ModelTest, SummaryCollectorAndMetricsLogger) {
  TempDir dir("model");
  auto p = make_parts();
  Model model(p.net, p.loss, p.opt, {{"Accuracy", zenith::metrics::Accuracy()}});
  auto train = blobs(90, 1).batch(30);  // 3 steps per epoch
  model.fit(
      2, train, blobs(30, 2).batch(30), 1,
      {cb::SummaryCollector(dir / "summary", 2), cb::MetricsLogger(dir / "metrics.jsonl", 2)});
  std::vector<fs::path> files;
  for (auto& e : fs::directory_iterator(dir / "summary")) files.push_back(e.path());
  ASSERT_EQ(files.size(), 1u);
  auto events = zenith::io::read_scalar_events(files[0].string());
  std::map<std::string, int> count;
  for (auto& e : events) ++count[e.tag];
  EXPECT_EQ(count["loss"], 3);  // steps 2, 4, 6
  EXPECT_EQ(count["learning_rate"], 3);
  EXPECT_EQ(count["epoch_loss"], 2);
  EXPECT_EQ(count["epoch_time"], 2);
  EXPECT_EQ(count["eval/Accuracy"], 2);
  EXPECT_EQ(count["eval/Loss"], 2);

  std::ifstream in(dir / "metrics.jsonl");
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    EXPECT_TRUE(j.contains("step") && j.contains("epoch") && j.contains("name") &&
                j.contains("value") && j.contains("time"))
        << line;
    ++lines;
  }
  EXPECT_EQ(lines, int(events.size()));
}

TEST_F(ModelTest, BadUse) {
  auto p = make_parts();
  Model no_opt(p.net, p.loss);
  EXPECT_TRUE(zt::throws_with([&] { no_opt.train(1, blobs(10, 1).batch(5)); },
                              "needs a loss function and an optimizer"));
  Model model(p.net, p.loss, p.opt);
  EXPECT_TRUE(zt::throws_with([&] { model.train(1, blobs(10, 1).batch(5), {}, false, 3); },
                              "initial_epoch 3"));
  auto one_column = dataset::TensorDataset({Tensor::zeros({4, 4})}).batch(2);
  EXPECT_TRUE(zt::throws_with([&] { model.train(1, one_column); }, "(input, label) columns"));
}

}  // namespace
