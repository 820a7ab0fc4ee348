// Helpers of the graph tests: capture a function of tensors as a one-phase graph, replay a
// graph, run a training step eager or compiled, and compare tensors and models.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "graph/capture.h"
#include "graph/passes/passes.h"
#include "graph/replay.h"
#include "zenith/graph.h"
#include "zenith/zenith.h"

namespace zenith::graph::test {

using Fn = std::function<std::vector<Tensor>()>;
using State = std::vector<std::pair<std::string, Tensor>>;

// fn run once under the recorder as one phase; its results are the segment's outputs.
inline Graph capture(const Fn& fn, const std::vector<Tensor>& inputs, const State& state = {}) {
  Recorder rec(inputs, state);
  rec.begin_phase();
  std::vector<Tensor> out = fn();
  rec.end_phase(out);
  std::optional<Graph> g = rec.finish();
  EXPECT_TRUE(g.has_value()) << rec.failure();
  return g ? std::move(*g) : Graph();
}

// One replay of a one-phase graph over `inputs`: its outputs.
inline std::vector<Tensor> replay(const Graph& g, const std::vector<Tensor>& inputs) {
  Program p(g);
  p.bind_inputs(inputs);
  std::vector<Tensor> out = p.run_segment(0);
  p.finish();
  return out;
}

inline double max_abs_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  std::vector<double> x = a.to_double_vector(), y = b.to_double_vector();
  double d = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) d = std::max(d, std::abs(x[i] - y[i]));
  return d;
}

inline void expect_close(const std::vector<Tensor>& a, const std::vector<Tensor>& b,
                         double tol = 1e-6) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_LE(max_abs_diff(a[i], b[i]), tol) << "output " << i;
}

// One training step, eager (c null) or through the compiler: the loss phase, backward, the
// optimizer's update; returns the loss, read on the host between phases.
inline double train_step(StepCompiler* c, const std::vector<Tensor>& inputs, nn::Optimizer& opt,
                         const std::function<Tensor()>& loss_fn) {
  opt.zero_grad();
  StepRun run = c ? c->begin(inputs) : StepRun::eager();
  Tensor loss = run.phase([&] { return std::vector<Tensor>{loss_fn()}; })[0];
  const double value = loss.item();
  run.phase([&] {
    loss.backward();
    return std::vector<Tensor>{};
  });
  run.phase([&] {
    opt.step();
    return std::vector<Tensor>{};
  });
  run.finish();
  return value;
}

// One training step recorded as three phases (loss, backward, update); none (and the reason in
// the test's output) when the capture does not finish.
inline std::optional<Graph> record_step(const std::vector<Tensor>& inputs, const State& state,
                                        nn::Optimizer& opt,
                                        const std::function<Tensor()>& loss_fn) {
  opt.zero_grad();
  Recorder rec(inputs, state);
  rec.begin_phase();
  Tensor loss = loss_fn();
  rec.end_phase({loss});
  rec.begin_phase();
  loss.backward();
  rec.end_phase({});
  rec.begin_phase();
  opt.step();
  rec.end_phase({});
  std::optional<Graph> g = rec.finish();
  EXPECT_TRUE(g.has_value()) << rec.failure();
  return g;
}

// The largest difference between two models' state (same names).
// After schedule_updates_early: the update nodes placed in the backward ("... in backward") and
// the one after it. Each early one must lower the peak (with the kernels' workspaces): moved to
// just before the late one, its gradients alive until then, the peak rises.
inline void expect_early_updates_lower_the_peak(const Graph& g, int* early, int* late) {
  *early = *late = 0;
  int after = -1;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.op != OpId::multi_adam_update && n.op != OpId::multi_momentum_update) continue;
    const bool in_backward = n.fused.find("in backward") != std::string::npos;
    *early += in_backward;
    if (!in_backward) {
      *late += 1;
      after = int(i);
    }
  }
  const size_t peak = g.peak_intermediate_bytes(kernel_workspace_bytes);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.op != OpId::multi_adam_update && n.op != OpId::multi_momentum_update) continue;
    if (n.fused.find("in backward") == std::string::npos || after < 0) continue;
    Graph moved = g;
    Node u = moved.nodes[i];
    moved.nodes.erase(moved.nodes.begin() + int64_t(i));
    moved.nodes.insert(moved.nodes.begin() + (after - 1), std::move(u));
    moved.remove_nodes(std::vector<bool>(moved.nodes.size(), false));  // renumbers producers
    EXPECT_GT(moved.peak_intermediate_bytes(kernel_workspace_bytes), peak) << "update at " << i;
  }
}

inline double max_param_diff(const nn::Cell& a, const nn::Cell& b) {
  auto sa = a.state_dict(), sb = b.state_dict();
  double d = 0;
  for (auto& [name, t] : sa) d = std::max(d, max_abs_diff(t, sb.at(name)));
  return d;
}

}  // namespace zenith::graph::test
