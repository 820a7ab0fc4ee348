// The profiler (src/profiler): nothing registered while off; ops timed with self time and FLOPs;
// the step phases of Model.train; the Chrome trace against its schema; the summary's arithmetic.
#include "zenith/profiler.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include "core/dispatch.h"
#include "core/trace_range.h"
#include "support/chrome_trace_check.h"
#include "support/files.h"
#include "support/temp_dir.h"
#include "zenith/zenith.h"

namespace zenith::profiler {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

bool range_hooks_installed() { return core::detail::g_range_hooks.load() != nullptr; }

std::vector<const OpRecord*> ops_named(const Recording& r, const std::string& name) {
  std::vector<const OpRecord*> out;
  for (const auto& t : r.threads)
    for (const auto& o : t.ops)
      if (name == o.name) out.push_back(&o);
  return out;
}

TEST(Profiler, NothingIsRegisteredWhileOff) {
  EXPECT_FALSE(dispatch::observed());
  EXPECT_FALSE(range_hooks_installed());
  EXPECT_FALSE(active());
  {
    Profiler p;
    EXPECT_TRUE(dispatch::observed());
    EXPECT_TRUE(range_hooks_installed());
    EXPECT_TRUE(active());
    EXPECT_THROW(Profiler second, Error);  // one at a time
    p.stop();
    EXPECT_FALSE(dispatch::observed());
    EXPECT_FALSE(range_hooks_installed());
    p.stop();  // idempotent
  }
  {
    Profiler p;  // destroyed while running: stops
  }
  EXPECT_FALSE(dispatch::observed());
  EXPECT_FALSE(active());
}

TEST(Profiler, OpsHaveShapesFlopsAndSelfTime) {
  Tensor x = Tensor::randn({2, 3, 10, 10});
  Tensor w = Tensor::randn({4, 3, 3, 3});
  Tensor a = Tensor::randn({5, 7}), lw = Tensor::randn({6, 7}), lb = Tensor::randn({6});
  Tensor y = Tensor::rand({8, 8}), dy = Tensor::randn({8, 8});
  Profiler p;
  ops::conv2d(x, w);
  ops::linear(a, lw, lb);
  dispatch::call<OpId::linear_cross_entropy>(
      {a, lw, Tensor::from_vector(std::vector<int64_t>{0, 5, 2, 1, 3}, {5}), Tensor::scalar(1.0)});
  dispatch::call<OpId::linear_cross_entropy_grads>(
      {a, lw, Tensor::from_vector(std::vector<int64_t>{0, 5, 2, 1, 3}, {5}), Tensor::scalar(1.0)});
  dispatch::call<OpId::linear_cross_entropy_grads>(
      {a, lw, Tensor::from_vector(std::vector<int64_t>{0, 5, 2, 1, 3}, {5}), Tensor::scalar(1.0)},
      {.weight_grad = false});
  {
    // A decomposition records the ops it is made of inside it.
    dispatch::ForceDecomposition composed(OpId::sigmoid_backward);
    dispatch::call<OpId::sigmoid_backward>({dy, y});
  }
  p.stop();
  const Recording& r = p.recording();

  auto conv = ops_named(r, "conv2d");
  ASSERT_EQ(conv.size(), 1u);
  EXPECT_EQ(conv[0]->shapes, "[2, 3, 10, 10] [4, 3, 3, 3] -");
  EXPECT_DOUBLE_EQ(conv[0]->flops, 2.0 * (2 * 4 * 8 * 8) * (3 * 3 * 3));
  EXPECT_DOUBLE_EQ(conv[0]->self_us, conv[0]->end_us - conv[0]->start_us);
  auto linear = ops_named(r, "linear");
  ASSERT_EQ(linear.size(), 1u);
  EXPECT_DOUBLE_EQ(linear[0]->flops, 2.0 * 5 * 6 * 7);
  auto head = ops_named(r, "linear_cross_entropy");  // the fused output layer counts its GEMM
  ASSERT_EQ(head.size(), 1u);
  EXPECT_DOUBLE_EQ(head[0]->flops, 2.0 * 5 * 6 * 7);
  auto grads = ops_named(r, "linear_cross_entropy_grads");  // that GEMM and the gradient's two
  ASSERT_EQ(grads.size(), 2u);
  EXPECT_DOUBLE_EQ(grads[0]->flops, 3 * 2.0 * 5 * 6 * 7);
  EXPECT_DOUBLE_EQ(grads[1]->flops, 2 * 2.0 * 5 * 6 * 7) << "no dweight: a frozen weight";

  auto outer = ops_named(r, "sigmoid_backward");
  ASSERT_EQ(outer.size(), 1u);
  EXPECT_TRUE(outer[0]->decomposed);
  double inside = 0;
  int children = 0;
  for (const auto& t : r.threads)
    for (const auto& o : t.ops)
      if (&o != outer[0] && o.start_us >= outer[0]->start_us && o.end_us <= outer[0]->end_us) {
        inside += o.end_us - o.start_us;
        ++children;
      }
  EXPECT_GE(children, 2);  // y * (1 - y) * dy
  EXPECT_NEAR(outer[0]->self_us, outer[0]->end_us - outer[0]->start_us - inside, 1e-6);
  EXPECT_GE(outer[0]->self_us, 0);

  const Summary s = p.summary();
  ASSERT_FALSE(s.ops.empty());
  for (size_t i = 1; i < s.ops.size(); ++i) EXPECT_GE(s.ops[i - 1].self_ms, s.ops[i].self_ms);
  for (const OpTime& o : s.ops) {
    if (o.name == "conv2d") {
      EXPECT_GT(o.gflops_per_second(), 0);
    }
  }
}

// Graph replay runs kernels without call_erased and tells the observers itself
// (dispatch::notify_begin / notify_end): the profiler records such an op like a dispatched one.
TEST(Profiler, OpsAGraphReplayReportsAreRecordedLikeDispatchedOnes) {
  const std::vector<Tensor> inputs = {Tensor::randn({4, 3, 8, 8}), Tensor::randn({5, 3, 3, 3})};
  const std::vector<Tensor> outputs = {Tensor::zeros({4, 5, 6, 6})};
  AttrsOf<OpId::conv2d> attrs;
  attrs.input_shape = inputs[0].shape();
  attrs.weight_shape = inputs[1].shape();
  attrs.output_shape = outputs[0].shape();
  EXPECT_FALSE(dispatch::observed());  // a replay asks before it pays for events
  Profiler p;
  ASSERT_TRUE(dispatch::observed());
  dispatch::notify_begin(OpId::conv2d);
  dispatch::notify_end({OpId::conv2d, inputs, AttrsRef(OpId::conv2d, &attrs), outputs, false});
  p.stop();
  auto conv = ops_named(p.recording(), "conv2d");
  ASSERT_EQ(conv.size(), 1u);
  EXPECT_EQ(conv[0]->shapes, "[4, 3, 8, 8] [5, 3, 3, 3]");
  EXPECT_DOUBLE_EQ(conv[0]->flops, 2.0 * (4 * 5 * 6 * 6) * (3 * 3 * 3));
  EXPECT_GE(conv[0]->end_us, conv[0]->start_us);
}

TEST(Profiler, RangesOpenAtStopEndThere) {
  std::optional<core::TraceRange> early;
  {
    Profiler first;
    early.emplace(core::Range::forward);
  }  // stopped with the range open
  Profiler p;
  early.reset();  // it ends in another recording: not recorded there
  core::TraceRange step(core::Range::step);
  core::TraceRange forward(core::Range::forward);
  ops::relu(Tensor::randn({4}));
  p.stop();
  const Recording& r = p.recording();
  ASSERT_EQ(r.threads.size(), 1u);
  const auto& ranges = r.threads[0].ranges;
  ASSERT_EQ(ranges.size(), 2u);
  for (const auto& g : ranges) EXPECT_DOUBLE_EQ(g.end_us, r.end_us) << g.name;
  EXPECT_EQ(p.summary().steps, 1);
}

OpRecord op(const char* name, double start, double end, double self, double flops = 0) {
  return {.name = name,
          .start_us = start,
          .end_us = end,
          .self_us = self,
          .flops = flops,
          .decomposed = false,
          .shapes = {}};
}
RangeRecord range(const char* name, double start, double end, int64_t step = 0) {
  return {.name = name, .start_us = start, .end_us = end, .step = step};
}

// A known recording: one 10 ms step of data wait 1, forward 3, backward 5 holding a 2 ms
// communication wait, optimizer 0.5; two conv2d calls of 1 GFLOP and 2 ms each, one relu.
Recording known_recording() {
  Recording r;
  r.rank = 3;
  r.start_us = 1000;
  r.end_us = 12000;
  r.peak_bytes = 5 << 20;
  ThreadTrack t;
  t.tid = 42;
  t.name = "main";
  t.ranges = {range("step", 1000, 11000, 1),
              range("data wait", 1000, 2000),
              range("forward", 2000, 5000),
              range("backward", 5000, 10000),
              range("communication wait", 7200, 9200),
              range("optimizer", 10000, 10500)};
  t.ops = {op("conv2d", 2100, 4100, 2000, 1e9), op("relu", 4200, 4300, 100),
           op("conv2d", 5100, 7100, 2000, 1e9)};
  t.memory = {{2100, 1 << 20}, {4100, 3 << 20}};
  r.threads.push_back(t);
  return r;
}

TEST(Summary, PhasesExcludeNestedPhasesAndOpsSortBySelfTime) {
  const Summary s = summarize(known_recording());
  EXPECT_EQ(s.rank, 3);
  EXPECT_EQ(s.steps, 1);
  EXPECT_DOUBLE_EQ(s.steps_ms, 10);
  EXPECT_DOUBLE_EQ(s.wall_ms, 11);
  std::map<std::string, PhaseTime> phases;
  for (const auto& p : s.phases) phases[p.name] = p;
  EXPECT_DOUBLE_EQ(phases["data wait"].ms, 1);
  EXPECT_DOUBLE_EQ(phases["forward"].ms, 3);
  EXPECT_DOUBLE_EQ(phases["backward"].ms, 3);  // 5 minus its communication wait
  EXPECT_DOUBLE_EQ(phases["communication wait"].ms, 2);
  EXPECT_DOUBLE_EQ(phases["optimizer"].ms, 0.5);
  EXPECT_DOUBLE_EQ(phases["other"].ms, 0.5);
  double shares = 0;
  for (const auto& p : s.phases) shares += p.share;
  EXPECT_NEAR(shares, 1.0, 1e-12);
  ASSERT_EQ(s.ops.size(), 2u);
  EXPECT_EQ(s.ops[0].name, "conv2d");
  EXPECT_EQ(s.ops[0].calls, 2);
  EXPECT_DOUBLE_EQ(s.ops[0].self_ms, 4);
  EXPECT_DOUBLE_EQ(s.ops[0].share, 0.4);
  EXPECT_DOUBLE_EQ(s.ops[0].gflop, 2);
  EXPECT_DOUBLE_EQ(s.ops[0].gflops_per_second(), 500);
  EXPECT_EQ(s.ops[1].name, "relu");
  EXPECT_DOUBLE_EQ(s.ops[1].gflops_per_second(), 0);

  const std::string table = s.table();
  EXPECT_NE(table.find("1 steps, 10.00 ms per step, peak memory 5.0 MiB"), std::string::npos)
      << table;
  EXPECT_NE(table.find("communication wait          2.000   20.0%"), std::string::npos) << table;
  EXPECT_NE(table.find("conv2d                             2      4.000      4.000   40.0%     "
                       "500.0"),
            std::string::npos)
      << table;
  const json j = s.to_json();
  EXPECT_EQ(j["ops"][0]["gflops_per_second"], 500.0);
  EXPECT_FALSE(j["ops"][1].contains("gflops_per_second"));  // not known for relu
  EXPECT_EQ(j["phases"][2]["ms_per_step"], 3.0);
}

TEST(ChromeTrace, KnownRecordingFollowsTheSchema) {
  const json trace = chrome_trace(known_recording());
  EXPECT_EQ(zenith::testing::chrome_trace_problems(trace), std::vector<std::string>{});
  int complete = 0, counters = 0;
  for (const auto& e : trace["traceEvents"]) {
    EXPECT_EQ(e["pid"], 3);
    if (e["ph"] == "X") {
      ++complete;
      EXPECT_EQ(e["tid"], 42);
    }
    if (e["ph"] == "C") {
      ++counters;
      EXPECT_EQ(e["name"], "memory");
    }
    if (e["ph"] == "X" && e["cat"] == "step") {
      EXPECT_EQ(e["name"], "step 1");
      EXPECT_EQ(e["ts"], 1000.0);
      EXPECT_EQ(e["dur"], 10000.0);
    }
    if (e["ph"] == "X" && e["name"] == "conv2d") {
      EXPECT_EQ(e["args"]["gflop"], 1.0);
    }
  }
  EXPECT_EQ(complete, 9);
  EXPECT_EQ(counters, 2);
  // Enclosing slices come first where two start together (the step and its data wait).
  std::vector<std::string> names;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X") names.push_back(e["name"]);
  EXPECT_EQ(names[0], "step 1");
  EXPECT_EQ(names[1], "data wait");
}

TEST(ChromeTrace, TheCheckCatchesBrokenTraces) {
  using zenith::testing::chrome_trace_problems;
  const json good = chrome_trace(known_recording());
  auto broken = [&](auto edit) {
    json t = good;
    edit(t["traceEvents"]);
    return chrome_trace_problems(t);
  };
  EXPECT_FALSE(chrome_trace_problems(json::object()).empty());
  auto first_op = [](json& events) -> json& {
    for (auto& e : events)
      if (e["ph"] == "X" && e["cat"] == "op") return e;
    throw std::runtime_error("no op");
  };
  EXPECT_FALSE(broken([&](json& e) { first_op(e)["dur"] = -1; }).empty());
  EXPECT_FALSE(broken([&](json& e) { first_op(e)["ts"] = "0"; }).empty());
  EXPECT_FALSE(broken([&](json& e) { first_op(e).erase("pid"); }).empty());
  EXPECT_FALSE(broken([&](json& e) { first_op(e)["ph"] = "B"; }).empty());
  EXPECT_FALSE(broken([&](json& e) { first_op(e)["cat"] = "kernel"; }).empty());
  // An op running past the end of its forward phase does not nest.
  EXPECT_FALSE(broken([&](json& e) { first_op(e)["dur"] = 3500.0; }).empty());
  // Events of a thread nobody named.
  EXPECT_FALSE(broken([&](json& e) {
                 json kept = json::array();
                 for (const json& x : e)
                   if (x["name"] != "thread_name") kept.push_back(x);
                 e = kept;
               }).empty());
  EXPECT_FALSE(broken([&](json& e) {
                 e.push_back({{"ph", "C"},
                              {"name", "memory"},
                              {"pid", 3},
                              {"tid", 0},
                              {"ts", 1.0},
                              {"args", {{"MiB", "a lot"}}}});
               }).empty());
}

TEST(ChromeTrace, MergedRanksAreOneProcessEach) {
  Recording a = known_recording(), b = known_recording();
  a.rank = 0;
  b.rank = 1;
  const json merged = merge_chrome_traces({chrome_trace(a), chrome_trace(b)});
  EXPECT_EQ(zenith::testing::chrome_trace_problems(merged), std::vector<std::string>{});
  std::set<int> pids;
  for (const auto& e : merged["traceEvents"]) pids.insert(e["pid"].get<int>());
  EXPECT_EQ(pids, (std::set<int>{0, 1}));
  EXPECT_EQ(merged["otherData"]["ranks"], json::array({0, 1}));
}

callbacks::CallbackPtr profile(const std::string& dir, int64_t steps, int64_t skip) {
  callbacks::ProfileOptions o;
  o.dir = dir;
  o.steps = steps;
  o.skip_steps = skip;
  o.print = false;
  return callbacks::Profile(o);
}

// A small CNN on random 1x8x8 images, 6 batches of 4.
dataset::Dataset images() {
  manual_seed(3);
  return dataset::TensorDataset({Tensor::randn({24, 1, 8, 8}), Tensor::randint(0, 3, {24})},
                                {"image", "label"})
      .batch(4);
}

TEST(ProfileCallback, RecordsStepPhasesOfModelTrainAndWritesTheFiles) {
  zenith::testing::TempDir dir("profile_callback");
  manual_seed(1);
  auto net = nn::SequentialCell({nn::Conv2d(1, 4, 3, 1, "valid"), nn::ReLU(), nn::MaxPool2d(2),
                                 nn::Flatten(), nn::Dense(4 * 3 * 3, 3)});
  Model model(net, nn::SoftmaxCrossEntropyWithLogits(true),
              nn::Momentum(net->trainable_params(), 0.01, 0.9));
  const std::string out = dir.str() + "/profile";
  model.train(1, images(), {profile(out, 3, 2)});
  EXPECT_FALSE(active());

  const json summary = json::parse(zenith::testing::read_all(out + "/summary.json"));
  EXPECT_EQ(summary["steps"], 3);
  std::map<std::string, double> phases;
  double shares = 0;
  for (const auto& p : summary["phases"]) {
    phases[p["name"]] = p["ms"];
    shares += p["share"].get<double>();
  }
  EXPECT_NEAR(shares, 1.0, 1e-9);
  for (const char* phase : {"data wait", "forward", "backward", "optimizer"})
    EXPECT_GT(phases[phase], 0) << phase;
  EXPECT_EQ(phases["communication wait"], 0);  // one process
  std::set<std::string> op_names;
  for (const auto& o : summary["ops"]) op_names.insert(o["name"]);
  for (const char* op : {"conv2d", "conv2d_backward_weights", "linear", "momentum_update"})
    EXPECT_TRUE(op_names.count(op)) << op;
  EXPECT_NE(zenith::testing::read_all(out + "/summary.txt").find("op (by self time)"),
            std::string::npos);

  const json trace = json::parse(zenith::testing::read_all(out + "/trace.json"));
  EXPECT_EQ(zenith::testing::chrome_trace_problems(trace), std::vector<std::string>{});
  int steps = 0, memory = 0;
  for (const auto& e : trace["traceEvents"]) {
    steps += e["ph"] == "X" && e["cat"] == "step";
    memory += e["ph"] == "C";
  }
  EXPECT_EQ(steps, 3);
  EXPECT_GT(memory, 0);
}

// Graph mode: a replay skips the step's code and with it the ranges Model::train marks; each
// replayed phase is marked as the range its capture began (forward, backward, optimizer), so the
// phase split is the replayed segments', not all "other".
TEST(ProfileCallback, GraphModeReplaysRecordTheStepPhases) {
  zenith::testing::TempDir dir("profile_graph");
  const context::Options before = context::get_context();
  context::Options graph_mode = before;
  graph_mode.mode = context::GRAPH_MODE;
  context::set_context(graph_mode);
  manual_seed(1);
  auto net = nn::SequentialCell({nn::Conv2d(1, 4, 3, 1, "valid"), nn::ReLU(), nn::MaxPool2d(2),
                                 nn::Flatten(), nn::Dense(4 * 3 * 3, 3)});
  Model model(net, nn::SoftmaxCrossEntropyWithLogits(true),
              nn::Momentum(net->trainable_params(), 0.01, 0.9));
  const std::string out = dir.str() + "/profile";
  model.train(1, images(), {profile(out, 3, 3)});  // steps 4-6: replays
  context::set_context(before);
  ASSERT_NE(model.graph_steps(), nullptr);
  EXPECT_GE(model.graph_steps()->replays(), 3);

  const json trace = json::parse(zenith::testing::read_all(out + "/trace.json"));
  EXPECT_EQ(zenith::testing::chrome_trace_problems(trace), std::vector<std::string>{});
  std::map<std::string, int> ranges;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X" && (e["cat"] == "phase" || e["cat"] == "step"))
      ++ranges[e["cat"] == "step" ? "step" : e["name"].get<std::string>()];
  EXPECT_EQ(ranges["step"], 3);
  for (const char* phase : {"data wait", "forward", "backward"})
    EXPECT_EQ(ranges[phase], 3) << phase;
  // zero_grad, then the update phase (its updates may have moved into the backward).
  EXPECT_EQ(ranges["optimizer"], 6);
  const json summary = json::parse(zenith::testing::read_all(out + "/summary.json"));
  std::map<std::string, double> phases;
  for (const auto& p : summary["phases"]) phases[p["name"]] = p["ms"];
  EXPECT_GT(phases["forward"], 0);
  EXPECT_GT(phases["backward"], 0);
  // The replayed ops run inside the phases.
  EXPECT_LT(phases["other"], phases["forward"] + phases["backward"]);
}

TEST(ProfileCallback, ARunShorterThanTheWarmUpRecordsNothing) {
  zenith::testing::TempDir dir("profile_short");
  auto net = nn::SequentialCell({nn::Flatten(), nn::Dense(64, 3)});
  Model model(net, nn::SoftmaxCrossEntropyWithLogits(true),
              nn::Momentum(net->trainable_params(), 0.01, 0.9));
  model.train(1, images(), {profile(dir.str() + "/p", 10, 10)});
  EXPECT_FALSE(active());
  EXPECT_FALSE(fs::exists(dir.str() + "/p/trace.json"));
  // Fewer steps than asked for: what ran is recorded when the run ends.
  model.train(2, images(), {profile(dir.str() + "/q", 100, 1)}, false, 1);
  const json summary = json::parse(zenith::testing::read_all(dir.str() + "/q/summary.json"));
  EXPECT_EQ(summary["steps"], 5);
}

}  // namespace
}  // namespace zenith::profiler
