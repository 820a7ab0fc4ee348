// Helpers of the graph tests: capture a function of tensors as a one-phase graph, replay a
// graph, and compare tensors.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "graph/capture.h"
#include "graph/replay.h"
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

}  // namespace zenith::graph::test
