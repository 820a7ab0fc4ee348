// Model::train in graph mode (context GRAPH_MODE): the same losses and weights as eager over 20
// steps, the capture's figures in the step scalars, and a checkpoint written in one mode
// resumed in the other.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <random>

#include "graph_test_util.h"
#include "zenith/context.h"
#include "zenith/train.h"

namespace zenith::graph {
namespace {

namespace cb = callbacks;
namespace fs = std::filesystem;

// Random 3x16x16 images and labels: 80 samples, 10 steps of 8 per epoch.
dataset::Dataset images(uint64_t seed) {
  manual_seed(seed);
  const int64_t n = 80;
  return dataset::TensorDataset({Tensor::randn({n, 3, 16, 16}), Tensor::randint(0, 10, {n})},
                                {"image", "label"});
}

struct Trained {
  nn::CellPtr net;
  std::unique_ptr<Model> model;
  explicit Trained(uint64_t seed = 0) {
    manual_seed(seed);
    net = models::create("seedcnn", 3, 16, 10);
    auto opt = nn::Momentum(net->trainable_params(), 0.05, 0.9);
    model = std::make_unique<Model>(net, nn::SoftmaxCrossEntropyWithLogits(true), opt);
  }
};

class StepLosses : public cb::Callback {
 public:
  std::vector<double> losses;
  std::vector<std::map<std::string, double>> scalars;
  void on_train_step_end(cb::RunContext& c) override {
    losses.push_back(c.loss);
    if (!c.step_scalars.empty()) scalars.push_back(c.step_scalars);
  }
};

class GraphTrain : public ::testing::Test {
 protected:
  void SetUp() override {
    threads_ = context::get_num_threads();
    context::set_num_threads(1);
    options_ = context::get_context();
  }
  void TearDown() override {
    context::set_context(options_);
    context::set_num_threads(threads_);
  }
  static void set_mode(context::Mode mode) {
    context::Options o = context::get_context();
    o.mode = mode;
    context::set_context(o);
  }
  int threads_ = 1;
  context::Options options_;
};

TEST_F(GraphTrain, TwentyStepsInGraphModeEqualEager) {
  auto data = images(1).batch(8);
  Trained eager, graphed;
  auto le = std::make_shared<StepLosses>(), lg = std::make_shared<StepLosses>();
  set_mode(context::PYNATIVE_MODE);
  eager.model->train(2, data, {le});
  EXPECT_EQ(eager.model->graph_steps(), nullptr);
  set_mode(context::GRAPH_MODE);
  graphed.model->train(2, data, {lg});
  ASSERT_EQ(le->losses.size(), 20u);
  ASSERT_EQ(lg->losses.size(), 20u);
  for (size_t i = 0; i < 20; ++i) EXPECT_NEAR(le->losses[i], lg->losses[i], 1e-5) << i;
  auto se = eager.net->state_dict(), sg = graphed.net->state_dict();
  for (auto& [name, t] : se) EXPECT_LE(test::max_abs_diff(t, sg.at(name)), 1e-5) << name;
  const StepCompiler* c = graphed.model->graph_steps();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->captures(), 1);
  EXPECT_EQ(c->replays(), 19);
  // The capture's figures went with its step (and the memory arena's size with the next).
  ASSERT_GE(lg->scalars.size(), 1u);
  EXPECT_GT(lg->scalars[0].at("graph/ops"), lg->scalars[0].at("graph/ops_after_fusion"));
  EXPECT_GT(lg->scalars[0].at("graph/activations_mb_before"), 0);
  // One micro-batch per step and nothing reading .grad after it: the updates ran in the backward.
  EXPECT_GT(lg->scalars[0].at("graph/updates_in_backward"), 0);
  for (auto& p : graphed.net->trainable_params()) EXPECT_FALSE(p.grad().defined());
}

// ZENITH_GRAPH_UPDATE_IN_BACKWARD overrides the default; a bad value names the variable.
TEST_F(GraphTrain, UpdatesInTheBackwardCanBeTurnedOff) {
  auto data = images(2).batch(8);
  set_mode(context::GRAPH_MODE);
  ::setenv("ZENITH_GRAPH_UPDATE_IN_BACKWARD", "0", 1);
  Trained off;
  auto l = std::make_shared<StepLosses>();
  off.model->train(1, data, {l});
  ASSERT_GE(l->scalars.size(), 1u);
  EXPECT_EQ(l->scalars[0].at("graph/updates_in_backward"), 0);
  for (auto& p : off.net->trainable_params()) EXPECT_TRUE(p.grad().defined());
  ::setenv("ZENITH_GRAPH_UPDATE_IN_BACKWARD", "yes", 1);
  Trained bad;
  try {
    bad.model->train(1, data, {});
    ADD_FAILURE() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("ZENITH_GRAPH_UPDATE_IN_BACKWARD"), std::string::npos)
        << e.what();
  }
  ::unsetenv("ZENITH_GRAPH_UPDATE_IN_BACKWARD");
}

TEST_F(GraphTrain, GradientAccumulationInGraphModeEqualsEager) {
  // Two micro-batches per step: the graph holds two forward and backward phases, then the update.
  auto data = images(3).batch(8);
  Trained eager, graphed;
  eager.model->set_accumulation_steps(2);
  graphed.model->set_accumulation_steps(2);
  auto le = std::make_shared<StepLosses>(), lg = std::make_shared<StepLosses>();
  set_mode(context::PYNATIVE_MODE);
  eager.model->train(2, data, {le});
  set_mode(context::GRAPH_MODE);
  graphed.model->train(2, data, {lg});
  ASSERT_EQ(le->losses.size(), 10u);
  ASSERT_EQ(lg->losses.size(), 10u);
  for (size_t i = 0; i < 10; ++i) EXPECT_NEAR(le->losses[i], lg->losses[i], 1e-5) << i;
  auto se = eager.net->state_dict(), sg = graphed.net->state_dict();
  for (auto& [name, t] : se) EXPECT_LE(test::max_abs_diff(t, sg.at(name)), 1e-5) << name;
  EXPECT_EQ(graphed.model->graph_steps()->captures(), 1);
  EXPECT_EQ(graphed.model->graph_steps()->replays(), 9);
  // The update waits for the last micro-batch's gradients: not in the backward.
  ASSERT_GE(lg->scalars.size(), 1u);
  EXPECT_EQ(lg->scalars[0].at("graph/updates_in_backward"), 0);
}

TEST_F(GraphTrain, CheckpointsResumeAcrossModes) {
  fs::path dir = fs::temp_directory_path() / ("zenith_graph_ckpt_" + std::to_string(getpid()));
  fs::remove_all(dir);
  auto data = images(2).batch(8);
  // Graph mode writes after epoch 1; eager resumes; both end as an all-eager run.
  Trained full, first(0), resumed(7);
  set_mode(context::PYNATIVE_MODE);
  auto lf = std::make_shared<StepLosses>();
  full.model->train(2, data, {lf});
  set_mode(context::GRAPH_MODE);
  first.model->train(1, data, {cb::ModelCheckpoint(dir.string())});
  ASSERT_TRUE(fs::exists(dir / "checkpoint_epoch_1.safetensors"));
  set_mode(context::PYNATIVE_MODE);
  resumed.model->load_checkpoint((dir / "checkpoint_epoch_1.safetensors").string());
  auto lr = std::make_shared<StepLosses>();
  resumed.model->train(2, data, {lr}, false, resumed.model->epochs_done());
  ASSERT_EQ(lr->losses.size(), 10u);
  for (size_t i = 0; i < 10; ++i) EXPECT_NEAR(lr->losses[i], lf->losses[10 + i], 1e-5) << i;

  // And the other way: eager writes, graph mode resumes.
  fs::remove_all(dir);
  Trained writer(0), reader(9);
  writer.model->train(1, data, {cb::ModelCheckpoint(dir.string())});
  reader.model->load_checkpoint((dir / "checkpoint_epoch_1.safetensors").string());
  set_mode(context::GRAPH_MODE);
  auto lg = std::make_shared<StepLosses>();
  reader.model->train(2, data, {lg}, false, reader.model->epochs_done());
  ASSERT_EQ(lg->losses.size(), 10u);
  for (size_t i = 0; i < 10; ++i) EXPECT_NEAR(lg->losses[i], lf->losses[10 + i], 1e-5) << i;
  auto sf = full.net->state_dict(), sg = reader.net->state_dict();
  for (auto& [name, t] : sf) EXPECT_LE(test::max_abs_diff(t, sg.at(name)), 1e-5) << name;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace zenith::graph
