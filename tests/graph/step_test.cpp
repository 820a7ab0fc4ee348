// Graph mode's step compiler: a training step (forward, loss, backward, optimizer update)
// captured once per input signature and replayed; 20 steps equal eager; fallbacks; the cache;
// the memory plan.
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>

#include "graph/memory_plan.h"
#include "graph/passes/passes.h"
#include "graph_test_util.h"
#include "zenith/graph.h"

namespace zenith::graph {
namespace {

// A model, loss and optimizer built from one seed, so two trainers start equal.
struct Trainer {
  nn::CellPtr net;
  nn::LossPtr loss_fn;
  nn::OptimizerPtr opt;
  test::State state;
  Trainer(const std::string& arch, int64_t image, bool adam = false) {
    manual_seed(0);
    net = models::create(arch, 3, image, 10);
    net->set_train(true);
    loss_fn = nn::SoftmaxCrossEntropyWithLogits(true);
    opt = adam ? nn::Adam(net->trainable_params(), nn::warmup_cosine_lr(1e-3, 3, 20, 1e-5))
               : nn::Momentum(net->trainable_params(), 0.01, 0.9);
    for (auto& p : net->named_parameters()) state.push_back(p);
    for (auto& p : net->named_buffers()) state.push_back(p);
    for (auto& [k, v] : opt->state_dict()) state.push_back({"optimizer." + k, v});
  }
  // One step, eager (c null) or through the compiler; returns the loss read between phases.
  double step(StepCompiler* c, const Tensor& x, const Tensor& y) {
    return test::train_step(c, {x, y}, *opt, [&] { return (*loss_fn)(net->forward(x), y); });
  }
  // The step's graph as the compiler captures it, before the passes.
  std::optional<Graph> record(const Tensor& x, const Tensor& y) {
    return test::record_step({x, y}, state, *opt, [&] { return (*loss_fn)(net->forward(x), y); });
  }
};

double max_param_diff(const nn::CellPtr& a, const nn::CellPtr& b) {
  return test::max_param_diff(*a, *b);
}

class GraphStep : public ::testing::Test {
 protected:
  void SetUp() override {
    threads_ = context::get_num_threads();
    context::set_num_threads(1);  // reductions in one order in both modes
  }
  void TearDown() override { context::set_num_threads(threads_); }
  int threads_ = 1;
};

// Runs `steps` steps in both modes over the same batches; expects equal losses and parameters.
void expect_equal_training(const std::string& arch, int64_t batch, int64_t image, int steps,
                           bool adam = false, bool in_backward = false) {
  Trainer eager(arch, image, adam), graphed(arch, image, adam);
  std::vector<std::string> log;
  StepCompiler c(
      graphed.state, graphed.opt.get(),
      {.update_in_backward = in_backward, .log = [&](const std::string& l) { log.push_back(l); }});
  manual_seed(1);
  for (int i = 0; i < steps; ++i) {
    Tensor x = Tensor::randn({batch, 3, image, image});
    Tensor y = Tensor::randint(0, 10, {batch});
    const double le = eager.step(nullptr, x, y);
    const double lg = graphed.step(&c, x, y);
    EXPECT_NEAR(le, lg, 1e-5) << arch << " step " << i;
  }
  EXPECT_EQ(c.captures(), 1);
  EXPECT_EQ(c.replays(), steps - 1);
  EXPECT_EQ(c.eager_steps(), 0);
  EXPECT_LE(max_param_diff(eager.net, graphed.net), 1e-5) << arch;
  EXPECT_EQ(eager.opt->step_count(), graphed.opt->step_count());
  EXPECT_DOUBLE_EQ(eager.opt->current_lr(), graphed.opt->current_lr());
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].rfind("graph: ", 0), 0u) << log[0];
  std::cout << arch << ": " << log[0] << "\n";
}

TEST_F(GraphStep, SeedCnnTwentyStepsEqualEager) { expect_equal_training("seedcnn", 8, 32, 20); }

TEST_F(GraphStep, SeedCnnWithAdamAndAScheduleEqualsEager) {
  // Replays follow the learning rate schedule and Adam's step count.
  expect_equal_training("seedcnn", 4, 32, 8, /*adam=*/true);
}

TEST_F(GraphStep, ResNet18EqualsEager) {
  // Small batch and image to keep CI time low; 20 steps run in bench/graph_vs_eager --check.
  expect_equal_training("resnet18", 2, 32, 4);
}

// The optimizer in the backward: updates run as their gradients become final; the same training.
TEST_F(GraphStep, SeedCnnWithUpdatesInTheBackwardEqualsEager) {
  expect_equal_training("seedcnn", 4, 32, 8, /*adam=*/true, /*in_backward=*/true);
}

TEST_F(GraphStep, ResNet18WithUpdatesInTheBackwardEqualsEager) {
  expect_equal_training("resnet18", 2, 32, 4, /*adam=*/false, /*in_backward=*/true);
}

// The captured ResNet-18 step before and after scheduling its updates in the backward: the one
// multi-tensor update splits into groups placed right after the nodes that finish their
// gradients where that lowers the step's peak, the rest in one update after the backward, all
// in the backward's segment; no gradient outlives the step, so the graph's activation peak
// (which held every gradient) drops, and replays leave no .grad.
TEST_F(GraphStep, UpdatesInTheBackwardSplitAndMoveBeforeTheUpdatePhase) {
  Trainer t("resnet18", 32);
  manual_seed(3);
  Tensor x = Tensor::randn({2, 3, 32, 32}), y = Tensor::randint(0, 10, {2});
  std::optional<Graph> g = t.record(x, y);
  ASSERT_TRUE(g.has_value());
  Graph kept = *g;
  optimize(kept);
  EXPECT_EQ(kept.count(OpId::multi_momentum_update), 1);
  g->grads.clear();
  PassReport r = optimize(*g, {.update_in_backward = true});
  if (std::getenv("ZENITH_GRAPH_TEST_DUMP")) std::cout << g->dump();
  const int updates = g->count(OpId::multi_momentum_update);
  int early = 0, late = 0;
  test::expect_early_updates_lower_the_peak(*g, &early, &late);
  EXPECT_EQ(r.updates_in_backward, early);
  EXPECT_EQ(early + late, updates);
  EXPECT_GT(early, 3);
  EXPECT_EQ(late, 1);
  int64_t params = 0;
  for (size_t i = 0; i < g->nodes.size(); ++i) {
    const Node& n = g->nodes[i];
    if (n.op != OpId::multi_momentum_update) continue;
    params += n.get<OpId::multi_momentum_update>().count;
    EXPECT_EQ(n.segment, 1) << i;
    if (n.fused.find("in backward") == std::string::npos) continue;
    // Right after the last node touching its operands (making a gradient, reading a weight),
    // or after updates placed there.
    size_t j = i - 1;
    while (g->nodes[j].op == OpId::multi_momentum_update) --j;
    bool touches = false;
    for (const Operand& in : n.inputs) {
      for (ValueId o : g->nodes[j].outputs) touches = touches || in.value == o;
      for (const Operand& o : g->nodes[j].inputs) touches = touches || in.value == o.value;
    }
    EXPECT_TRUE(touches) << i;
  }
  EXPECT_EQ(params, int64_t(t.net->trainable_params().size()));
  size_t grad_bytes = 0;
  for (auto& p : t.net->trainable_params()) grad_bytes += size_t(p.numel()) * 4;
  EXPECT_LT(g->peak_intermediate_bytes() + grad_bytes / 2, kept.peak_intermediate_bytes());

  StepCompiler c(t.state, t.opt.get(),
                 {.update_in_backward = true, .log = [](const std::string&) {}});
  for (int i = 0; i < 3; ++i) t.step(&c, x, y);
  EXPECT_EQ(c.replays(), 2);
  for (auto& p : t.net->trainable_params()) EXPECT_FALSE(p.grad().defined());
  EXPECT_NE(c.last_capture()->line().find("updates in backward "), std::string::npos)
      << c.last_capture()->line();
}

TEST_F(GraphStep, CaptureReportCountsFusionsAndMemory) {
  Trainer t("seedcnn", 32);
  StepCompiler c(t.state, t.opt.get(), {.log = [](const std::string&) {}});
  manual_seed(2);
  for (int i = 0; i < 3; ++i)
    t.step(&c, Tensor::randn({8, 3, 32, 32}), Tensor::randint(0, 10, {8}));
  const CaptureReport* r = c.last_capture();
  ASSERT_NE(r, nullptr);
  EXPECT_GT(r->ops, r->ops_after);
  // SeedCNN has no BatchNorm, and its ReLU follows the pooling: the first convolution fuses
  // with its pooling and ReLU, the second pooling with its ReLU (forward and backward), the
  // optimizer update fuses, the gradient clones go (ResNet-18's bn+relu fusions:
  // ResNet18EqualsEager prints them).
  EXPECT_EQ(r->fusions.at("conv+relu+maxpool"), 1);
  EXPECT_EQ(r->fusions.at("conv+relu+maxpool backward"), 1);
  EXPECT_EQ(r->fusions.at("maxpool+relu"), 1);
  EXPECT_EQ(r->fusions.at("maxpool+relu backward"), 1);
  EXPECT_EQ(r->fusions.at("optimizer"), 1);
  EXPECT_EQ(r->in_place, 5);
  EXPECT_EQ(r->constants, 1);
  EXPECT_GT(r->activations_before, 0u);
  EXPECT_LE(r->activations_after, r->activations_before);
  auto s = r->scalars();
  EXPECT_EQ(s.at("graph/ops"), r->ops);
  EXPECT_EQ(s.at("graph/ops_after_fusion"), r->ops_after);
  EXPECT_EQ(r->line().rfind("graph: 30 ops -> 15 after fusion (conv+relu+maxpool 1, "
                            "conv+relu+maxpool backward 1, maxpool+relu 1, maxpool+relu "
                            "backward 1, optimizer 1, ",
                            0),
            0u)
      << r->line();
  EXPECT_NE(r->line().find("; activations "), std::string::npos) << r->line();
  // The third step used the memory plan the second one recorded.
  EXPECT_GT(c.arena_bytes(), 0u);
}

// ZENITH_GRAPH_CONV_POOL=0 leaves the first convolution unfused (both of SeedCNN's poolings then
// fuse with their ReLU alone).
TEST_F(GraphStep, ConvPoolFusionTurnsOffThroughTheEnvironment) {
  ::setenv("ZENITH_GRAPH_CONV_POOL", "0", 1);
  Trainer t("seedcnn", 32);
  StepCompiler c(t.state, t.opt.get(), {.log = [](const std::string&) {}});
  manual_seed(2);
  for (int i = 0; i < 2; ++i)
    t.step(&c, Tensor::randn({8, 3, 32, 32}), Tensor::randint(0, 10, {8}));
  ::unsetenv("ZENITH_GRAPH_CONV_POOL");
  ASSERT_NE(c.last_capture(), nullptr);
  const std::string line = c.last_capture()->line();
  EXPECT_EQ(line.find("conv+relu+maxpool"), std::string::npos) << line;
  EXPECT_EQ(
      line.rfind("graph: 30 ops -> 17 after fusion (maxpool+relu 2, maxpool+relu backward 2, ", 0),
      0u)
      << line;
}

// A signature the cache dropped and met again is captured anew, the first time logged (the
// steps take more shapes than the cache keeps).
TEST_F(GraphStep, NewShapesCaptureNewGraphsInABoundedCache) {
  Trainer t("seedcnn", 32);
  std::vector<std::string> lines;
  StepCompiler c(t.state, t.opt.get(),
                 {.max_graphs = 2, .log = [&](const std::string& l) { lines.push_back(l); }});
  manual_seed(3);
  auto step = [&](int64_t batch) {
    t.step(&c, Tensor::randn({batch, 3, 32, 32}), Tensor::randint(0, 10, {batch}));
  };
  step(4);
  step(4);
  step(2);  // a new batch size: captured
  step(4);
  EXPECT_EQ(c.captures(), 2);
  EXPECT_EQ(c.replays(), 2);
  EXPECT_EQ(c.recaptures(), 0);
  step(3);  // a third signature evicts the least recently used (batch 2)
  EXPECT_EQ(c.cached(), 2u);
  EXPECT_EQ(c.recaptures(), 0);
  step(2);
  EXPECT_EQ(c.captures(), 4);
  EXPECT_EQ(c.recaptures(), 1);
  step(4);  // evicted by batch 2: again
  EXPECT_EQ(c.recaptures(), 2);
  int warnings = 0;
  for (const std::string& l : lines)
    if (l.find("capturing again a step whose graph was dropped from the cache (it keeps 2)") !=
        std::string::npos)
      ++warnings;
  EXPECT_EQ(warnings, 1) << "logged once";
}

TEST_F(GraphStep, HostReadsInsideAPhaseFallBackToEagerLoggedOnce) {
  Trainer eager("seedcnn", 32), graphed("seedcnn", 32);
  std::vector<std::string> log;
  StepCompiler c(graphed.state, graphed.opt.get(),
                 {.log = [&](const std::string& l) { log.push_back(l); }});
  manual_seed(4);
  for (int i = 0; i < 3; ++i) {
    Tensor x = Tensor::randn({4, 3, 32, 32}), y = Tensor::randint(0, 10, {4});
    eager.step(nullptr, x, y);
    graphed.opt->zero_grad();
    StepRun run = c.begin({x, y});
    Tensor loss = run.phase([&] {
      Tensor l = (*graphed.loss_fn)(graphed.net->forward(x), y);
      if (l.item() > 1e9) l = ops::mul(l, 0.0);  // data-dependent control flow
      return std::vector<Tensor>{l};
    })[0];
    run.phase([&] {
      loss.backward();
      return std::vector<Tensor>{};
    });
    run.phase([&] {
      graphed.opt->step();
      return std::vector<Tensor>{};
    });
    run.finish();
  }
  EXPECT_EQ(c.replays(), 0);
  EXPECT_EQ(c.eager_steps(), 2);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find("runs eagerly"), std::string::npos) << log[0];
  EXPECT_NE(c.fallback_reason().find("read on the host"), std::string::npos);
  EXPECT_LE(max_param_diff(eager.net, graphed.net), 1e-6);
}

TEST(GraphMemoryPlan, PackedBuffersNeverOverlapWhileAlive) {
  // [alloc, free) in events; the plan puts buffers alive together at disjoint offsets.
  std::vector<PlannedBuffer> b = {{1000, 0, 4}, {500, 1, 3}, {500, 2, 6},
                                  {1000, 5, 8}, {200, 7, 9}, {64, 3, -1}};
  const size_t arena = pack_buffers(b);
  for (size_t i = 0; i < b.size(); ++i) {
    if (b[i].free < 0) {
      EXPECT_EQ(b[i].offset, -1);  // outlives the replay: not planned
      continue;
    }
    ASSERT_GE(b[i].offset, 0);
    EXPECT_LE(size_t(b[i].offset) + b[i].size, arena);
    for (size_t j = 0; j < i; ++j) {
      if (b[j].free < 0) continue;
      const bool together = b[i].alloc < b[j].free && b[j].alloc < b[i].free;
      const bool overlap = b[i].offset < b[j].offset + int64_t(b[j].size) &&
                           b[j].offset < b[i].offset + int64_t(b[i].size);
      EXPECT_FALSE(together && overlap) << i << " " << j;
    }
  }
  // Peak live is 2000 bytes (buffers 0, 1, 2 at events 2-3); aligned to 64 bytes each, 2048,
  // which the packing reaches here.
  EXPECT_EQ(peak_live_bytes(b), 2000u);
  EXPECT_EQ(arena, 2048u);
  EXPECT_LT(arena, 1000u + 500 + 500 + 1000 + 200);
}

TEST(GraphMemoryPlan, PackingTriesOrdersBeyondLargestFirst) {
  // Largest first puts 1 at 0 and 3 above 2 (which is placed at 0 beside 0 at 64): 448 bytes.
  // By size x lifetime, 2 goes to 256 and 3 to 0: the peak, 384 (2 and 3 at event 6).
  std::vector<PlannedBuffer> b = {{64, 1, 6}, {256, 2, 3}, {128, 5, 7}, {256, 6, 8}};
  EXPECT_EQ(peak_live_bytes(b), 384u);
  EXPECT_EQ(pack_buffers(b), 384u);
  for (size_t i = 0; i < b.size(); ++i)
    for (size_t j = 0; j < i; ++j) {
      const bool together = b[i].alloc < b[j].free && b[j].alloc < b[i].free;
      const bool overlap = b[i].offset < b[j].offset + int64_t(b[j].size) &&
                           b[j].offset < b[i].offset + int64_t(b[i].size);
      EXPECT_FALSE(together && overlap) << i << " " << j;
    }
}

TEST(GraphMemoryPlan, ABufferWrittenOverADyingOneTakesItsPlace) {
  // Buffer 1 is made while 0 is alive and written over it (0 dies at the same op); buffer 2 is
  // alive with both. 3 claims to be written over 2 but is larger: planned on its own.
  std::vector<PlannedBuffer> b = {
      {1000, 0, 3}, {1000, 2, 6, -1, 0}, {500, 1, 7}, {600, 5, 8, -1, 2}};
  const size_t arena = pack_buffers(b);
  EXPECT_EQ(b[1].offset, b[0].offset);
  EXPECT_NE(b[2].offset, b[0].offset);
  EXPECT_EQ(peak_live_bytes(b), 1000u + 500 + 600);  // at event 5: {0,1}, 2 and 3
  EXPECT_EQ(arena, 1024u + 512 + 640);
  b[1].over = -1;                              // without it: 0 and 1 are both alive at event 2
  EXPECT_EQ(peak_live_bytes(b), 2000u + 500);  // at event 2: 0, 1 and 2
}

TEST_F(GraphStep, MemoryPlanKeepsResultsAndShrinksTheArena) {
  Trainer planned("seedcnn", 32), unplanned("seedcnn", 32);
  StepCompiler a(planned.state, planned.opt.get(), {.log = [](const std::string&) {}});
  StepCompiler b(unplanned.state, unplanned.opt.get(),
                 {.plan_memory = false, .log = [](const std::string&) {}});
  manual_seed(5);
  for (int i = 0; i < 4; ++i) {
    Tensor x = Tensor::randn({8, 3, 32, 32}), y = Tensor::randint(0, 10, {8});
    EXPECT_EQ(planned.step(&a, x, y), unplanned.step(&b, x, y));
  }
  EXPECT_EQ(max_param_diff(planned.net, unplanned.net), 0);
  EXPECT_GT(a.arena_bytes(), 0u);
  EXPECT_EQ(b.arena_bytes(), 0u);
  // The arena holds the step's activations and its gradients (which outlive the replay, until
  // the next one) in less than both together: buffers never alive together share memory.
  size_t grad_bytes = 0;
  for (auto& p : planned.net->trainable_params()) grad_bytes += size_t(p.numel()) * 4;
  EXPECT_LT(a.arena_bytes(), a.last_capture()->activations_before + grad_bytes);
}

// The graphs of several input shapes share one arena, the largest plan's, not one each; another
// graph's replay while a replay's outputs are still held takes a new arena and leaves them be.
TEST_F(GraphStep, GraphsOfSeveralShapesShareOneArena) {
  auto quiet = [](const std::string&) {};
  // Each shape's arena alone.
  size_t alone[2] = {0, 0};
  const int64_t sizes[2] = {8, 4};
  for (int k = 0; k < 2; ++k) {
    Trainer t("seedcnn", 32);
    StepCompiler c(t.state, t.opt.get(), {.log = quiet});
    manual_seed(11);
    for (int i = 0; i < 3; ++i)
      t.step(&c, Tensor::randn({sizes[k], 3, 32, 32}), Tensor::randint(0, 10, {sizes[k]}));
    alone[k] = c.arena_bytes();
    ASSERT_GT(alone[k], 0u);
    EXPECT_EQ(c.arena_allocations(), 1);
  }
  ASSERT_NE(alone[0], alone[1]);

  Trainer eager("seedcnn", 32), graphed("seedcnn", 32);
  std::vector<std::string> lines;
  StepCompiler c(graphed.state, graphed.opt.get(),
                 {.log = [&](const std::string& l) { lines.push_back(l); }});
  manual_seed(12);
  auto held_lines = [&] {
    int n = 0;
    for (const std::string& l : lines) n += l.find("are still held") != std::string::npos;
    return n;
  };
  auto step = [&](int64_t batch) {
    Tensor x = Tensor::randn({batch, 3, 32, 32}), y = Tensor::randint(0, 10, {batch});
    EXPECT_NEAR(eager.step(nullptr, x, y), graphed.step(&c, x, y), 1e-5) << "batch " << batch;
  };
  // 8: capture, record, the arena; 4: capture (the idle arena freed first), record, the arena
  // again (as large as the larger plan); then both alternate in it.
  for (int64_t b : {8, 8, 8, 4, 4, 4, 8, 4, 8, 4}) step(b);
  EXPECT_EQ(c.captures(), 2);
  EXPECT_EQ(c.arena_bytes(), std::max(alone[0], alone[1]));
  EXPECT_EQ(c.arena_allocations(), 2);
  EXPECT_EQ(held_lines(), 0);

  // Gradients of batch 4's replay held past its step: batch 8's replay goes to a new arena.
  std::vector<Tensor> held, copies;
  for (auto& p : graphed.net->trainable_params()) {
    held.push_back(p.grad());
    copies.push_back(p.grad().clone());
  }
  step(8);
  EXPECT_EQ(c.arena_allocations(), 3);
  EXPECT_EQ(held_lines(), 1);
  for (size_t i = 0; i < held.size(); ++i) EXPECT_EQ(test::max_abs_diff(held[i], copies[i]), 0);
  held.clear();
  step(4);
  step(8);
  EXPECT_EQ(c.arena_allocations(), 3);
  // Held again: a 4th arena, the line not repeated.
  Tensor kept = graphed.net->trainable_params()[0].grad();
  step(4);
  kept = Tensor();
  EXPECT_EQ(c.arena_allocations(), 4);
  EXPECT_EQ(held_lines(), 1);
  EXPECT_EQ(c.arena_bytes(), std::max(alone[0], alone[1]));
  EXPECT_LE(max_param_diff(eager.net, graphed.net), 1e-5);
}

// A step the host code stops after its first phase (zenith finetune's spike guard rejecting the
// step) is no divergence from the memory plan: a replay stopped so keeps it, and a stopped
// recording replay leaves the recording to the next one.
TEST_F(GraphStep, AStepStoppedEarlyKeepsTheMemoryPlan) {
  Trainer eager("seedcnn", 32), graphed("seedcnn", 32);
  StepCompiler c(graphed.state, graphed.opt.get(), {.log = [](const std::string&) {}});
  manual_seed(13);
  auto stopped = [&](Trainer& t, StepCompiler* compiler, const Tensor& x, const Tensor& y) {
    t.opt->zero_grad();
    StepRun run = compiler ? compiler->begin({x, y}) : StepRun::eager();
    return run.phase([&] { return std::vector<Tensor>{(*t.loss_fn)(t.net->forward(x), y)}; })[0]
        .item();
  };
  testing::internal::CaptureStderr();
  int64_t planned_replay_allocations = -1;
  // Step 1 captures, 2 would record (stopped), 3 records, 4 uses the arena (stopped), 5-6 use it.
  for (int i = 0; i < 6; ++i) {
    Tensor x = Tensor::randn({4, 3, 32, 32}), y = Tensor::randint(0, 10, {4});
    if (i == 1 || i == 3) {
      EXPECT_NEAR(stopped(eager, nullptr, x, y), stopped(graphed, &c, x, y), 1e-5) << i;
      continue;
    }
    const core::AllocatorStats before = core::allocator_stats();
    const double lg = graphed.step(&c, x, y);
    const core::AllocatorStats after = core::allocator_stats();
    if (i == 5)
      planned_replay_allocations = (after.hits + after.misses) - (before.hits + before.misses);
    EXPECT_NEAR(eager.step(nullptr, x, y), lg, 1e-5) << i;
  }
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err.find("no longer follow"), std::string::npos) << err;
  EXPECT_EQ(c.captures(), 1);
  EXPECT_EQ(c.arena_allocations(), 1);
  // The last replay's buffers all came from the arena (the allocator served the step's few
  // host-side tensors only; a dropped plan sends every buffer of the replay to it).
  EXPECT_LT(planned_replay_allocations, 8);
  EXPECT_LE(max_param_diff(eager.net, graphed.net), 1e-5);
}

TEST_F(GraphStep, GradientsInTheArenaOutliveTheCompiler) {
  // A replay's gradients are in the graph's arena; the compiler (and its arena) can go first.
  Trainer t("seedcnn", 32);
  std::vector<Tensor> grads, copies;
  {
    StepCompiler c(t.state, t.opt.get(), {.log = [](const std::string&) {}});
    manual_seed(7);
    for (int i = 0; i < 3; ++i)
      t.step(&c, Tensor::randn({4, 3, 32, 32}), Tensor::randint(0, 10, {4}));
    ASSERT_GT(c.arena_bytes(), 0u);
    for (auto& p : t.net->trainable_params()) {
      grads.push_back(p.grad());
      copies.push_back(p.grad().clone());
    }
  }
  // Other allocations must not land in the retired arena while the gradients hold it.
  std::vector<Tensor> other;
  for (int i = 0; i < 16; ++i) other.push_back(Tensor::full({64, 1024}, double(i)));
  for (size_t i = 0; i < grads.size(); ++i) EXPECT_EQ(test::max_abs_diff(grads[i], copies[i]), 0);
  t.opt->zero_grad();
  grads.clear();  // the last blocks: the arena goes
  for (int i = 0; i < 16; ++i) EXPECT_EQ(other[size_t(i)].to_double_vector()[4096], double(i));
}

}  // namespace
}  // namespace zenith::graph

namespace zenith::graph {
namespace {

// The captured SeedCNN step before and after the passes.
TEST_F(GraphStep, SeedCnnGraphBeforeAndAfterThePasses) {
  Trainer t("seedcnn", 32);
  manual_seed(6);
  Tensor x = Tensor::randn({8, 3, 32, 32}), y = Tensor::randint(0, 10, {8});
  std::optional<Graph> g = t.record(x, y);
  ASSERT_TRUE(g.has_value());
  if (std::getenv("ZENITH_GRAPH_TEST_DUMP")) std::cout << g->dump();
  EXPECT_EQ(g->count(OpId::copy), 5);  // autograd's 4 gradient clones, the flatten's copy
  EXPECT_EQ(g->count(OpId::momentum_update), 4);
  EXPECT_EQ(g->count(OpId::fill_), 1);  // the loss's seed gradient
  PassReport r = optimize(*g);
  if (std::getenv("ZENITH_GRAPH_TEST_DUMP")) std::cout << "after:\n" << g->dump();
  EXPECT_EQ(r.ops_before, 30);
  EXPECT_EQ(r.ops_after, 15);
  EXPECT_EQ(g->count(OpId::copy), 0);
  EXPECT_EQ(g->count(OpId::fill_), 0);
  EXPECT_EQ(g->count(OpId::momentum_update), 0);
  EXPECT_EQ(g->count(OpId::multi_momentum_update), 1);
  // Each convolution is read by max_pool2d (no conv+relu here); the first, over 3 channels,
  // fuses with its pooling and ReLU, and their backward with its weight gradient.
  EXPECT_EQ(g->count(OpId::conv2d), 1);
  EXPECT_EQ(g->count(OpId::conv2d_relu_max_pool), 1);
  EXPECT_EQ(g->count(OpId::conv2d_relu_max_pool_backward), 1);
  EXPECT_EQ(g->count(OpId::conv2d_backward_weights), 1);
  EXPECT_EQ(g->count(OpId::max_pool2d_relu), 1);
  EXPECT_EQ(g->count(OpId::max_pool2d_relu_backward), 1);
  EXPECT_EQ(g->count(OpId::relu) + g->count(OpId::relu_backward), 0);
}

// Max pooling's backward takes from its input only the shape and format (where dy goes is in
// the workspace): it reads a stand-in without bytes, so the pooled activation (SeedCNN's conv
// outputs) is last read in the forward and the plan frees it there.
TEST_F(GraphStep, MaxPoolBackwardKeepsOnlyItsInputsShape) {
  Trainer t("seedcnn", 32);
  manual_seed(6);
  Tensor x = Tensor::randn({8, 3, 32, 32}), y = Tensor::randint(0, 10, {8});
  std::optional<Graph> g = t.record(x, y);
  ASSERT_TRUE(g.has_value());
  optimize(*g);
  const auto readers = g->readers();
  int pools = 0, backwards = 0;
  for (const Node& n : g->nodes) {
    if (n.op == OpId::max_pool2d || n.op == OpId::max_pool2d_relu) {
      ++pools;
      const Value& in = g->values[size_t(n.inputs[0].value)];
      EXPECT_EQ(in.kind, ValueKind::kIntermediate);
      for (int r : readers[size_t(n.inputs[0].value)])
        EXPECT_EQ(g->nodes[size_t(r)].segment, n.segment)
            << "read by " << op_name(g->nodes[size_t(r)].op);
    }
    if (n.op == OpId::max_pool2d_backward || n.op == OpId::max_pool2d_relu_backward) {
      ++backwards;
      const Value& stand_in = g->values[size_t(n.inputs[1].value)];
      EXPECT_EQ(stand_in.kind, ValueKind::kConstant);
      EXPECT_EQ(stand_in.nbytes, 0u);
      EXPECT_EQ(n.overwrites, -1);
    }
  }
  EXPECT_EQ(pools, 1);  // the first pooling is in conv2d_relu_max_pool
  EXPECT_EQ(backwards, 1);
}

}  // namespace
}  // namespace zenith::graph
