// Every graph pass on a small captured graph: the op counts before and after, and the replayed
// results equal to the eager ones (and to the graph's before the pass).
#include "graph/passes/passes.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <initializer_list>
#include <iostream>
#include <utility>

#include "backend/cpu/onednn_layout.h"
#include "core/dispatch.h"
#include "core/op_list.h"
#include "graph/memory_plan.h"
#include "graph_test_util.h"

namespace zenith::graph {
namespace {

using test::capture;
using test::expect_close;
using test::replay;

void dump(const char* what, const Graph& g) {
  if (std::getenv("ZENITH_GRAPH_TEST_DUMP")) std::cout << what << ":\n" << g.dump();
}

// Expects g to hold each op the given number of times.
void expect_counts(const Graph& g, std::initializer_list<std::pair<OpId, int>> want) {
  for (const auto& [op, n] : want) EXPECT_EQ(g.count(op), n) << op_name(op);
}

Tensor randn(const Shape& s) { return Tensor::randn(s); }

// Three replays of a one-phase graph with a memory plan (the first records, the next ones run in
// the arena), each equal to `expected` within tol: the arena's bytes, and in *overwritten the
// buffers the plan placed over a dying input.
size_t planned_arena(const Graph& graph, const std::vector<Tensor>& inputs,
                     const std::vector<Tensor>& expected, double tol, size_t* overwritten) {
  Program p(graph);
  p.enable_memory_plan();
  for (int i = 0; i < 3; ++i) {
    p.bind_inputs(inputs);
    std::vector<Tensor> out = p.run_segment(0);
    expect_close(out, expected, tol);
    p.finish();
  }
  *overwritten = p.memory_plan()->overwritten_buffers();
  return p.memory_plan()->arena_bytes();
}

TEST(GraphPasses, DeadOpEliminationDropsUnusedResults) {
  manual_seed(1);
  Tensor x = randn({4, 8}), y = randn({4, 8});
  auto fn = [&] {
    Tensor unused = ops::exp(x);
    Tensor unused2 = ops::sum(unused);
    return std::vector<Tensor>{ops::mul(x, y)};
  };
  std::vector<Tensor> eager = fn();
  Graph g = capture(fn, {x, y});
  dump("before", g);
  EXPECT_EQ(g.nodes.size(), 3u);
  EXPECT_EQ(eliminate_dead_ops(g), 2);
  dump("after", g);
  EXPECT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.count(OpId::exp), 0);
  EXPECT_EQ(g.count(OpId::mul), 1);
  expect_close(replay(g, {x, y}), eager, 0);
}

TEST(GraphPasses, DeadOpEliminationKeepsInPlaceWrites) {
  manual_seed(2);
  Tensor x = randn({2, 3, 4, 4}), w = Tensor::ones({3}), b = Tensor::zeros({3});
  Tensor rm = Tensor::zeros({3}), rv = Tensor::ones({3});
  // The normalised result is unused, but the running statistics outlive the step.
  auto fn = [&] {
    ops::batch_norm(x, w, b, rm, rv, true);
    return std::vector<Tensor>{};
  };
  Graph g = capture(fn, {x}, {{"w", w}, {"b", b}, {"rm", rm}, {"rv", rv}});
  EXPECT_EQ(g.count(OpId::batch_norm), 1);
  EXPECT_EQ(eliminate_dead_ops(g), 0);
  EXPECT_EQ(g.count(OpId::batch_norm), 1);
}

TEST(GraphPasses, CommonSubexpressionsMerge) {
  manual_seed(3);
  Tensor x = randn({16, 8});
  auto fn = [&] {
    Tensor a = ops::sum(x, {1});
    Tensor b = ops::sum(x, {1});
    Tensor c = ops::sum(x, {0});  // other attributes: not the same
    return std::vector<Tensor>{ops::add(a, b), c};
  };
  std::vector<Tensor> eager = fn();
  Graph g = capture(fn, {x});
  dump("before", g);
  EXPECT_EQ(g.count(OpId::sum), 3);
  EXPECT_EQ(eliminate_common_subexpressions(g), 1);
  dump("after", g);
  EXPECT_EQ(g.count(OpId::sum), 2);
  EXPECT_EQ(g.count(OpId::add), 1);
  expect_close(replay(g, {x}), eager, 0);
}

TEST(GraphPasses, ConstantsFoldAtCompileTime) {
  manual_seed(4);
  Tensor x = randn({4, 8});
  auto fn = [&] {
    Tensor c = Tensor::full({8}, 0.5);  // made inside the step, every step
    Tensor e = ops::exp(ops::mul(c, c));
    return std::vector<Tensor>{ops::add(x, e)};
  };
  std::vector<Tensor> eager = fn();
  Graph g = capture(fn, {x});
  dump("before", g);
  const int before = int(g.nodes.size());
  EXPECT_EQ(g.count(OpId::exp), 1);
  const int folded = fold_constants(g);
  dump("after", g);
  EXPECT_EQ(folded, 3);  // the fill, and mul and exp of constants
  EXPECT_EQ(int(g.nodes.size()), before - folded);
  expect_counts(g, {{OpId::exp, 0}, {OpId::mul, 0}, {OpId::add, 1}});
  expect_close(replay(g, {x}), eager, 0);
  // Another input: the folded constant is reused, the result follows the input.
  Tensor x2 = randn({4, 8});
  expect_close(replay(g, {x2}),
               {ops::add(x2, ops::exp(ops::mul(Tensor::full({8}, 0.5), Tensor::full({8}, 0.5))))},
               0);
}

TEST(GraphPasses, LayoutConversionsOfAPlainTensorGo) {
  manual_seed(5);
  Tensor x = randn({4, 8});
  auto fn = [&] {
    Tensor p = dispatch::call1<OpId::to_plain>({ops::exp(x)});  // already plain: the identity
    return std::vector<Tensor>{ops::mul(p, x)};
  };
  std::vector<Tensor> eager = fn();
  Graph g = capture(fn, {x});
  dump("before", g);
  EXPECT_EQ(g.count(OpId::to_plain), 1);
  EXPECT_EQ(propagate_layouts(g), 1);
  dump("after", g);
  EXPECT_EQ(g.count(OpId::to_plain), 0);
  expect_close(replay(g, {x}), eager, 0);
}

TEST(GraphPasses, LayoutConversionsOfABlockedTensorMerge) {
  manual_seed(6);
  Tensor x = randn({2, 16, 8, 8}), w = randn({16, 16, 3, 3});
  auto fn = [&] {
    Tensor y = ops::conv2d(x, w, Tensor(), {.padding = {1, 1}});
    Tensor a = dispatch::call1<OpId::to_plain>({y});
    Tensor b = dispatch::call1<OpId::to_plain>({y});
    return std::vector<Tensor>{ops::add(a, b)};
  };
  std::vector<Tensor> eager = fn();
  Graph g = capture(fn, {x}, {{"w", w}});
  dump("before", g);
  const int conversions = g.count(OpId::to_plain);
  ASSERT_GE(conversions, 1);
  const int merged = propagate_layouts(g);
  dump("after", g);
  // With a oneDNN blocked conv output the two conversions become one; a plain output has none.
  EXPECT_EQ(g.count(OpId::to_plain), conversions == 2 ? 1 : 0);
  EXPECT_EQ(merged, conversions == 2 ? 1 : conversions);
  expect_close(replay(g, {x}), eager, 1e-5);
}

TEST(GraphPasses, CopiesOfDyingBuffersAreReusedInPlace) {
  manual_seed(7);
  Tensor x = randn({4, 8});
  auto fn = [&] {
    Tensor a = ops::exp(x);
    Tensor b = a.clone();       // a dies here: b can be a
    Tensor kept = ops::neg(x);  // read after its copy: stays
    Tensor c = kept.clone();
    return std::vector<Tensor>{ops::mul(b, c), ops::add(kept, x)};
  };
  std::vector<Tensor> eager = fn();
  Graph g = capture(fn, {x});
  dump("before", g);
  EXPECT_EQ(g.count(OpId::copy), 2);
  EXPECT_EQ(reuse_in_place(g), 1);
  dump("after", g);
  EXPECT_EQ(g.count(OpId::copy), 1);
  expect_close(replay(g, {x}), eager, 0);
}

// Cross-entropy's backward writes dlogits over the logits, which die at it: the graph marks the
// node, its activation peak drops by the logits' bytes, and the replay's memory plan puts both
// in one place (a smaller arena), with results equal to eager.
TEST(GraphPasses, CrossEntropyBackwardWritesOverTheDyingLogits) {
  manual_seed(10);
  Tensor x = randn({64, 16}), w = randn({16, 1000}).requires_grad_(true);
  Tensor target = Tensor::randint(0, 1000, {64});
  auto fn = [&] {
    w.zero_grad();
    Tensor loss = ops::cross_entropy(ops::matmul(x, w), target);
    loss.backward();
    return std::vector<Tensor>{loss, w.grad()};
  };
  std::vector<Tensor> eager = fn();
  for (Tensor& t : eager) t = t.clone();
  Graph g = capture(fn, {x, target}, {{"w", w}});
  const Graph unmarked = g;
  dump("before", g);
  const size_t logits_bytes = 64 * 1000 * 4, before = g.peak_intermediate_bytes();
  EXPECT_EQ(write_over_dying_inputs(g), 1);
  dump("after", g);
  int marked = 0;
  for (const Node& n : g.nodes) {
    if (n.overwrites < 0) continue;
    ++marked;
    EXPECT_EQ(n.op, OpId::cross_entropy_rows_backward);
    EXPECT_EQ(n.overwrites, 1);  // the logits
  }
  EXPECT_EQ(marked, 1);
  // The peak moves elsewhere (matmul's backward): it drops by less than the logits' bytes.
  const size_t after = g.peak_intermediate_bytes();
  EXPECT_GT(before - after, logits_bytes / 2);

  size_t plain_over = 0, over = 0;
  const size_t plain = planned_arena(unmarked, {x, target}, eager, 0, &plain_over);
  const size_t shared = planned_arena(g, {x, target}, eager, 0, &over);
  EXPECT_EQ(plain_over, 0u);
  EXPECT_EQ(over, 1u);
  EXPECT_EQ(plain - shared, before - after);  // the arena saves what the graph says
}

// A logits tensor read again after the backward is not written over.
TEST(GraphPasses, LogitsReadAfterTheBackwardAreNotWrittenOver) {
  manual_seed(11);
  Tensor x = randn({8, 16}), w = randn({16, 50}).requires_grad_(true);
  Tensor target = Tensor::randint(0, 50, {8});
  auto fn = [&] {
    w.zero_grad();
    Tensor logits = ops::matmul(x, w);
    Tensor loss = ops::cross_entropy(logits, target);
    loss.backward();
    return std::vector<Tensor>{loss, ops::exp(logits)};  // logits live on
  };
  Graph g = capture(fn, {x, target}, {{"w", w}});
  EXPECT_EQ(write_over_dying_inputs(g), 0);
}

TEST(GraphPasses, ConvReluFusesIntoOnePostOp) {
  manual_seed(8);
  Tensor x = randn({2, 3, 8, 8}), w = randn({8, 3, 3, 3}), b = randn({8});
  auto fn = [&] {
    return std::vector<Tensor>{ops::relu(ops::conv2d(x, w, b, {.padding = {1, 1}}))};
  };
  std::vector<Tensor> eager = fn();
  Graph g = capture(fn, {x}, {{"w", w}, {"b", b}});
  dump("before", g);
  EXPECT_EQ(g.count(OpId::conv2d), 1);
  EXPECT_EQ(g.count(OpId::relu), 1);
  FusionCounts counts;
  EXPECT_EQ(fuse_conv_relu(g, counts), 1);
  eliminate_dead_ops(g);
  dump("after", g);
  EXPECT_EQ(counts["conv+relu"], 1);
  expect_counts(g, {{OpId::conv2d_relu, 1}, {OpId::conv2d, 0}, {OpId::relu, 0}});
  expect_close(replay(g, {x}), eager, 1e-5);
}

TEST(GraphPasses, ConvReluStaysWhenTheConvOutputIsReadElsewhere) {
  manual_seed(9);
  Tensor x = randn({2, 3, 8, 8}), w = randn({8, 3, 3, 3});
  auto fn = [&] {
    Tensor y = ops::conv2d(x, w);
    return std::vector<Tensor>{ops::relu(y), ops::sum(y)};
  };
  Graph g = capture(fn, {x}, {{"w", w}});
  FusionCounts counts;
  EXPECT_EQ(fuse_conv_relu(g, counts), 0);
  EXPECT_EQ(g.count(OpId::conv2d), 1);
}

// MaxPool + ReLU (SequentialCell's order for ReLU then MaxPool2d) forward and backward: both fuse;
// outputs and the weight gradient equal eager's. 16 channels, 7x7: a row and a column in no window.
TEST(GraphPasses, MaxPoolReluFusesForwardAndBackward) {
  manual_seed(12);
  Tensor x = randn({2, 3, 9, 9});
  Tensor w = Tensor::randn({16, 3, 3, 3}).requires_grad_(true);
  auto fn = [&] {
    Tensor y = ops::relu(ops::max_pool2d(ops::conv2d(x, w), {2}));
    Tensor loss = ops::sum(ops::mul(y, y));
    loss.backward();
    return std::vector<Tensor>{y, loss};
  };
  std::vector<Tensor> eager = fn();
  Tensor gw = w.grad().clone();
  w.set_grad(Tensor());
  Graph g = capture(fn, {x}, {{"w", w}});
  w.set_grad(Tensor());
  dump("before", g);
  expect_counts(g, {{OpId::max_pool2d, 1},
                    {OpId::relu, 1},
                    {OpId::relu_backward, 1},
                    {OpId::max_pool2d_backward, 1}});
  const size_t before = g.nodes.size();
  FusionCounts counts;
  EXPECT_EQ(fuse_pool_relu(g, counts), 2);
  eliminate_dead_ops(g);
  dump("after", g);
  EXPECT_EQ(g.nodes.size(), before - 2);
  EXPECT_EQ(counts["maxpool+relu"], 1);
  EXPECT_EQ(counts["maxpool+relu backward"], 1);
  expect_counts(g, {{OpId::max_pool2d_relu, 1},
                    {OpId::max_pool2d_relu_backward, 1},
                    {OpId::max_pool2d, 0},
                    {OpId::relu, 0},
                    {OpId::relu_backward, 0},
                    {OpId::max_pool2d_backward, 0}});
  expect_close(replay(g, {x}), eager, 1e-5);
  EXPECT_LE(test::max_abs_diff(w.grad(), gw), 1e-4);
}

// The pooled values read by another op too: nothing fuses (relu's input must die at relu).
TEST(GraphPasses, MaxPoolReluStaysWhenThePooledValuesAreReadElsewhere) {
  manual_seed(13);
  Tensor x = randn({2, 16, 6, 6});
  auto fn = [&] {
    Tensor p = ops::max_pool2d(x, {2});
    return std::vector<Tensor>{ops::relu(p), ops::sum(p)};
  };
  Graph g = capture(fn, {x});
  FusionCounts counts;
  EXPECT_EQ(fuse_pool_relu(g, counts), 0);
  EXPECT_EQ(g.count(OpId::max_pool2d), 1);
  EXPECT_EQ(g.count(OpId::relu), 1);
}

// A first convolution (3 -> 16 channels, bias), ReLU and 2x2 max pooling, forward and backward:
// after fuse_pool_relu, the convolution and the pooling fuse, and the pooling's backward and the
// weight gradient (the input needs none); the pooled values and both gradients equal eager's.
// 9x9: the convolution's 7x7 output loses a row and a column to the pooling.
TEST(GraphPasses, ConvReluMaxPoolFusesForwardAndBackward) {
  manual_seed(14);
  Tensor x = randn({2, 3, 9, 9});
  Tensor w = Tensor::randn({16, 3, 3, 3}).requires_grad_(true);
  Tensor b = Tensor::randn({16}).requires_grad_(true);
  auto fn = [&] {
    Tensor y = ops::relu(ops::max_pool2d(ops::conv2d(x, w, b), {2}));
    Tensor loss = ops::sum(ops::mul(y, y));
    loss.backward();
    return std::vector<Tensor>{y, loss};
  };
  std::vector<Tensor> eager = fn();
  Tensor gw = w.grad().clone(), gb = b.grad().clone();
  w.set_grad(Tensor());
  b.set_grad(Tensor());
  Graph g = capture(fn, {x}, {{"w", w}, {"b", b}});
  w.set_grad(Tensor());
  b.set_grad(Tensor());
  FusionCounts counts;
  EXPECT_EQ(fuse_pool_relu(g, counts), 2);
  eliminate_dead_ops(g);
  dump("before", g);
  expect_counts(
      g, {{OpId::conv2d, 1}, {OpId::conv2d_backward_weights, 1}, {OpId::conv2d_backward_data, 0}});
  const size_t before = g.nodes.size();
  EXPECT_EQ(fuse_conv_pool(g, counts), 2);
  eliminate_dead_ops(g);
  dump("after", g);
  EXPECT_EQ(g.nodes.size(), before - 2);
  EXPECT_EQ(counts["conv+relu+maxpool"], 1);
  EXPECT_EQ(counts["conv+relu+maxpool backward"], 1);
  EXPECT_EQ(counts["maxpool+relu"], 0);
  EXPECT_EQ(counts["maxpool+relu backward"], 0);
  expect_counts(g, {{OpId::conv2d_relu_max_pool, 1},
                    {OpId::conv2d_relu_max_pool_backward, 1},
                    {OpId::conv2d, 0},
                    {OpId::conv2d_backward_weights, 0},
                    {OpId::max_pool2d_relu, 0},
                    {OpId::max_pool2d_relu_backward, 0}});
  // The convolution's sums run in another order than oneDNN's: float32 rounding apart (the loss,
  // ~5e3, to a few ulps).
  std::vector<Tensor> out = replay(g, {x});
  EXPECT_LE(test::max_abs_diff(out[0], eager[0]), 1e-5);
  EXPECT_NEAR(out[1].item(), eager[1].item(), 1e-6 * std::abs(eager[1].item()));
  EXPECT_LE(test::max_abs_diff(w.grad(), gw),
            1e-4 * test::max_abs_diff(gw, Tensor::zeros(gw.shape())));
  EXPECT_LE(test::max_abs_diff(b.grad(), gb),
            1e-4 * test::max_abs_diff(gb, Tensor::zeros(gb.shape())));
}

// Nothing fuses where the convolution's output is read by another op too, or where the input
// needs a gradient (the pooling's backward result is read by conv2d_backward_data as well).
TEST(GraphPasses, ConvReluMaxPoolStaysWhereTheConvOutputOrItsGradientIsReadElsewhere) {
  manual_seed(15);
  Tensor w = Tensor::randn({8, 1, 3, 3}).requires_grad_(true);
  {
    Tensor x = randn({2, 1, 8, 8});
    auto fn = [&] {
      Tensor c = ops::conv2d(x, w);
      return std::vector<Tensor>{ops::relu(ops::max_pool2d(c, {2})), ops::sum(c)};
    };
    Graph g = capture(fn, {x}, {{"w", w}});
    FusionCounts counts;
    EXPECT_EQ(fuse_pool_relu(g, counts), 1);
    EXPECT_EQ(fuse_conv_pool(g, counts), 0);
    EXPECT_EQ(g.count(OpId::conv2d), 1);
    EXPECT_EQ(g.count(OpId::max_pool2d_relu), 1);
  }
  {
    Tensor x = randn({2, 1, 8, 8}).requires_grad_(true);
    auto fn = [&] {
      Tensor y = ops::relu(ops::max_pool2d(ops::conv2d(x, w), {2}));
      Tensor loss = ops::sum(ops::mul(y, y));
      loss.backward();
      return std::vector<Tensor>{loss};
    };
    Graph g = capture(fn, {}, {{"w", w}, {"x", x}});
    w.set_grad(Tensor());
    x.set_grad(Tensor());
    FusionCounts counts;
    EXPECT_EQ(fuse_pool_relu(g, counts), 2);
    EXPECT_EQ(g.count(OpId::conv2d_backward_data), 1);
    EXPECT_EQ(fuse_conv_pool(g, counts), 0);
    expect_counts(g, {{OpId::conv2d, 1},
                      {OpId::conv2d_backward_weights, 1},
                      {OpId::max_pool2d_relu_backward, 1}});
  }
}

// BatchNorm + ReLU forward and backward (training): both fuse; gradients and running statistics
// equal eager's.
TEST(GraphPasses, BatchNormReluFusesForwardAndBackward) {
  manual_seed(10);
  Tensor x = randn({4, 6, 5, 5});
  Tensor w = Tensor::randn({6}).requires_grad_(true), b = Tensor::randn({6}).requires_grad_(true);
  auto run = [&](Tensor rm, Tensor rv) {
    return [&, rm, rv] {
      Tensor y = ops::relu(ops::batch_norm(x, w, b, rm, rv, true));
      Tensor loss = ops::sum(ops::mul(y, y));
      loss.backward();
      return std::vector<Tensor>{y, loss};
    };
  };
  Tensor rm_e = Tensor::zeros({6}), rv_e = Tensor::ones({6});
  std::vector<Tensor> eager = run(rm_e, rv_e)();
  Tensor gw = w.grad().clone(), gb = b.grad().clone();
  w.set_grad(Tensor());
  b.set_grad(Tensor());

  Tensor rm = Tensor::zeros({6}), rv = Tensor::ones({6});
  Tensor rm0 = rm.clone(), rv0 = rv.clone();
  Graph g = capture(run(rm, rv), {x}, {{"w", w}, {"b", b}, {"rm", rm}, {"rv", rv}});
  w.set_grad(Tensor());
  b.set_grad(Tensor());
  dump("before", g);
  expect_counts(g, {{OpId::batch_norm, 1},
                    {OpId::relu, 1},
                    {OpId::relu_backward, 1},
                    {OpId::batch_norm_backward, 1}});
  FusionCounts counts;
  EXPECT_EQ(fuse_batch_norm_relu(g, counts), 2);
  eliminate_dead_ops(g);
  dump("after", g);
  EXPECT_EQ(counts["bn+relu"], 1);
  EXPECT_EQ(counts["bn+relu backward"], 1);
  expect_counts(g, {{OpId::batch_norm_relu, 1},
                    {OpId::batch_norm_relu_backward, 1},
                    {OpId::relu, 0},
                    {OpId::relu_backward, 0},
                    {OpId::batch_norm, 0},
                    {OpId::batch_norm_backward, 0}});

  rm.copy_(rm0);  // the capture ran the step once
  rv.copy_(rv0);
  // The convolution's sums run in another order than oneDNN's: float32 rounding apart (the loss,
  // ~5e3, to a few ulps).
  std::vector<Tensor> out = replay(g, {x});
  EXPECT_LE(test::max_abs_diff(out[0], eager[0]), 1e-5);
  EXPECT_NEAR(out[1].item(), eager[1].item(), 1e-6 * std::abs(eager[1].item()));
  EXPECT_LE(test::max_abs_diff(w.grad(), gw),
            1e-4 * test::max_abs_diff(gw, Tensor::zeros(gw.shape())));
  EXPECT_LE(test::max_abs_diff(b.grad(), gb),
            1e-4 * test::max_abs_diff(gb, Tensor::zeros(gb.shape())));
  EXPECT_LE(test::max_abs_diff(rm, rm_e), 1e-6);
  EXPECT_LE(test::max_abs_diff(rv, rv_e), 1e-6);
}

TEST(GraphPasses, ElementwiseChainsBecomeOneLoop) {
  manual_seed(11);
  Tensor x = randn({32, 16}), y = randn({32, 16}), bias = randn({16});
  auto fn = [&] {
    // A residual add, a broadcast bias, a scale and a SwiGLU-like gate: one loop.
    Tensor h = ops::add(ops::mul(x, y), bias);
    Tensor gate = ops::mul(ops::silu(h), ops::mul(y, 0.5));
    Tensor out = ops::add(gate, x);
    return std::vector<Tensor>{out};
  };
  std::vector<Tensor> eager = fn();
  Graph g = capture(fn, {x, y}, {{"bias", bias}});
  dump("before", g);
  EXPECT_EQ(g.nodes.size(), 7u);  // the scalar 0.5 is a fill into a constant
  EXPECT_EQ(fold_constants(g), 1);
  EXPECT_EQ(g.nodes.size(), 6u);
  FusionCounts counts;
  EXPECT_EQ(fuse_elementwise(g, counts), 1);
  eliminate_dead_ops(g);
  dump("after", g);
  EXPECT_EQ(counts["elementwise"], 1);
  EXPECT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.count(OpId::fused_elementwise), 1);
  expect_close(replay(g, {x, y}), eager, 1e-6);
}

TEST(GraphPasses, AttentionScaleAndMaskBeforeSoftmaxFuse) {
  // scores * 1/sqrt(d) + causal mask (broadcast over batch and heads), then softmax: the scale
  // and the mask add become one loop; the softmax stays its own op.
  manual_seed(16);
  Tensor scores = randn({2, 4, 8, 8});
  Tensor mask = ops::mul(Tensor::ones({8, 8}), -1e9);
  auto fn = [&] {
    Tensor s = ops::add(ops::mul(scores, 0.125), mask);
    return std::vector<Tensor>{ops::softmax(s, -1)};
  };
  std::vector<Tensor> eager = fn();
  Graph g = capture(fn, {scores}, {{"mask", mask}});
  dump("before", g);
  fold_constants(g);  // the scalar 0.125
  EXPECT_EQ(g.count(OpId::mul), 1);
  EXPECT_EQ(g.count(OpId::add), 1);
  FusionCounts counts;
  EXPECT_EQ(fuse_elementwise(g, counts), 1);
  eliminate_dead_ops(g);
  dump("after", g);
  EXPECT_EQ(g.count(OpId::fused_elementwise), 1);
  EXPECT_EQ(g.count(OpId::softmax), 1);
  EXPECT_EQ(g.nodes.size(), 2u);
  expect_close(replay(g, {scores}), eager, 1e-6);
}

TEST(GraphPasses, AReductionJoinsItsElementwiseProducers) {
  manual_seed(12);
  Tensor x = randn({64, 8}), y = randn({64, 8});
  auto fn = [&] {
    Tensor d = ops::sub(x, y);
    return std::vector<Tensor>{ops::sum(ops::square(d))};  // a squared error
  };
  std::vector<Tensor> eager = fn();
  Graph g = capture(fn, {x, y});
  dump("before", g);
  EXPECT_EQ(g.nodes.size(), 3u);
  FusionCounts counts;
  EXPECT_EQ(fuse_elementwise(g, counts), 1);
  eliminate_dead_ops(g);
  dump("after", g);
  EXPECT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.count(OpId::sum), 0);
  ASSERT_EQ(g.count(OpId::fused_elementwise), 1);
  EXPECT_TRUE(g.nodes[0].get<OpId::fused_elementwise>().sum_last);
  expect_close(replay(g, {x, y}), eager, 1e-4);
}

// A pre-norm block's residual stream: h = x + y, then rms_norm(h); backward, the norm's dx plus
// the residual's gradient. Both pairs become one op; a broadcast add (a bias) is left alone.
TEST(GraphPasses, ResidualAddAndRmsNormFuseForwardAndBackward) {
  manual_seed(17);
  Tensor x = randn({2, 8, 16}), y = randn({2, 8, 16}), dy = randn({2, 8, 16});
  Tensor dres = randn({2, 8, 16}), w = randn({16}), bias = randn({16});
  const LayerNormAttrs a{.D = 16, .eps = 1e-5};
  auto fn = [&] {
    Tensor h = ops::add(x, y);
    std::vector<Tensor> norm = dispatch::call<OpId::rms_norm>({h, w}, a);
    std::vector<Tensor> grad = dispatch::call<OpId::rms_norm_backward>({dy, h, w, norm[1]}, a);
    Tensor dh = ops::add(dres, grad[0]);
    Tensor biased = ops::add(h, bias);  // broadcast: not fused
    Tensor other = dispatch::call<OpId::rms_norm>({biased, w}, a)[0];
    return std::vector<Tensor>{h, norm[0], dh, grad[1], other};
  };
  std::vector<Tensor> eager = fn();
  Graph g = capture(fn, {x, y, dy, dres}, {{"w", w}, {"bias", bias}});
  dump("before", g);
  expect_counts(g, {{OpId::add, 3}, {OpId::rms_norm, 2}, {OpId::rms_norm_backward, 1}});
  FusionCounts counts;
  EXPECT_EQ(fuse_residual_norm(g, counts), 2);
  dump("after", g);
  EXPECT_EQ(counts["add+rmsnorm"], 1);
  EXPECT_EQ(counts["rmsnorm backward+add"], 1);
  EXPECT_EQ(g.count(OpId::add_rms_norm), 1);
  EXPECT_EQ(g.count(OpId::rms_norm_add_backward), 1);
  EXPECT_EQ(g.count(OpId::add), 1);  // the bias
  EXPECT_EQ(g.count(OpId::rms_norm), 1);
  EXPECT_EQ(g.count(OpId::rms_norm_backward), 0);
  EXPECT_EQ(g.nodes.size(), 4u);
  expect_close(replay(g, {x, y, dy, dres}), eager, 1e-6);
}

// RoPE and its backward write [B, H, T, D]; autograd copies dq and dk into [B, T, H, D] for the
// projection's gradient. The copy goes into the op, which reads every operand (cos and sin of
// rank 2 and 4 broadcast) through the same permutation: no copy left, the results bit-equal.
// A rotary result read elsewhere too, a copy to another dtype and a plain copy stay.
TEST(GraphPasses, RopeWritesItsTransposingCopysResult) {
  manual_seed(31);
  const int64_t b = 2, t = 5, h = 3, d = 8;
  Tensor x = randn({b, t, h, d}), dy = randn({b, h, t, d});
  Tensor cos2 = randn({t, d}), sin2 = randn({t, d});
  Tensor cos4 = randn({1, 1, t, d}), sin4 = randn({1, 1, t, d});
  auto fn = [&] {
    Tensor q = ops::rotary_embedding(x.transpose(1, 2), cos2, sin2);  // [B, H, T, D]
    Tensor q_bthd = q.transpose(1, 2).contiguous();                   // folded
    Tensor dq = dispatch::call1<OpId::rotary_embedding_backward>({dy, cos4, sin4});
    Tensor dq_bthd = dq.transpose(1, 2).contiguous();  // folded
    Tensor k = ops::rotary_embedding(x.transpose(1, 2), cos4, sin4);
    Tensor k_bthd = k.transpose(1, 2).contiguous();  // k is returned too: stays
    Tensor dk = dispatch::call1<OpId::rotary_embedding_backward>({dy, cos2, sin2});
    Tensor dk_f64 = dk.transpose(1, 2).to(DType::f64);  // another dtype: stays
    Tensor r = ops::rotary_embedding(dy, cos2, sin2);
    Tensor r_copy = r.clone();  // not a permutation: reuse_in_place's, stays here
    return std::vector<Tensor>{q_bthd, dq_bthd, k, k_bthd, dk_f64, r_copy};
  };
  std::vector<Tensor> eager = fn();
  Graph g = capture(fn, {x, dy}, {{"cos2", cos2}, {"sin2", sin2}, {"cos4", cos4}, {"sin4", sin4}});
  dump("before", g);
  expect_counts(
      g, {{OpId::rotary_embedding, 3}, {OpId::rotary_embedding_backward, 2}, {OpId::copy, 5}});
  FusionCounts counts;
  EXPECT_EQ(fold_transposing_copies(g, counts), 2);
  dump("after", g);
  EXPECT_EQ(counts["rope+transpose"], 2);
  expect_counts(
      g, {{OpId::rotary_embedding, 3}, {OpId::rotary_embedding_backward, 2}, {OpId::copy, 3}});
  std::vector<Tensor> replayed = replay(g, {x, dy});
  expect_close(replayed, eager, 0);
  EXPECT_EQ(replayed[0].shape(), (Shape{b, t, h, d}));
  EXPECT_TRUE(replayed[0].is_contiguous());
  EXPECT_TRUE(replayed[1].is_contiguous());
}

// A tied embedding's gradient: the output layer's [V, D] weight gradient plus the embedding's
// scattered rows becomes one op; an embedding gradient read elsewhere too stays.
TEST(GraphPasses, TiedEmbeddingGradientScatterAddsIntoTheOutputLayers) {
  manual_seed(18);
  Tensor dy = randn({2, 5, 8}), dh = randn({10, 16}), h = randn({10, 8});
  Tensor ids = Tensor::from_vector(std::vector<int64_t>{1, 3, 3, 0, 15, 2, 3, 9, 1, 1}, {2, 5});
  const EmbeddingBackwardAttrs a{.num_rows = 16};
  auto fn = [&] {
    Tensor head = ops::matmul(dh.t(), h);  // [16, 8]
    Tensor tied = ops::add(head, dispatch::call1<OpId::embedding_backward>({dy, ids}, a));
    Tensor rows = dispatch::call1<OpId::embedding_backward>({dy, ids}, a);
    Tensor twice = ops::add(rows, head);
    return std::vector<Tensor>{tied, twice, ops::sum(rows)};
  };
  std::vector<Tensor> eager = fn();
  Graph g = capture(fn, {dy, dh, h, ids});
  dump("before", g);
  EXPECT_EQ(g.count(OpId::embedding_backward), 2);
  FusionCounts counts;
  EXPECT_EQ(fuse_embedding_grad(g, counts), 1);
  dump("after", g);
  EXPECT_EQ(counts["embedding grad+add"], 1);
  EXPECT_EQ(g.count(OpId::embedding_backward_add), 1);
  EXPECT_EQ(g.count(OpId::embedding_backward), 1);  // its rows also summed: not fused
  EXPECT_EQ(g.count(OpId::add), 1);
  expect_close(replay(g, {dy, dh, h, ids}), eager, 1e-6);
}

// The tied gradient written over the output layer's, which dies at it: the replay's memory plan
// gives both one place, so the op adds only the token rows (no [V, D] copy); equal to eager.
TEST(GraphPasses, TiedEmbeddingGradientIsWrittenOverTheOutputLayers) {
  manual_seed(19);
  Tensor dy = randn({2, 5, 8}), dh = randn({10, 64}), h = randn({10, 8});
  Tensor ids = Tensor::from_vector(std::vector<int64_t>{1, 3, 3, 0, 63, 2, 3, 9, 1, 1}, {2, 5});
  const EmbeddingBackwardAttrs a{.num_rows = 64};
  auto fn = [&] {
    Tensor head = ops::matmul(dh.t(), h);  // [64, 8], read only by the sum
    Tensor rows = dispatch::call1<OpId::embedding_backward>({dy, ids}, a);
    return std::vector<Tensor>{ops::mul(ops::add(head, rows), Tensor::scalar(2.0))};
  };
  std::vector<Tensor> eager = fn();
  Graph g = capture(fn, {dy, dh, h, ids});
  FusionCounts counts;
  ASSERT_EQ(fuse_embedding_grad(g, counts), 1);
  const Graph unmarked = g;
  const size_t before = g.peak_intermediate_bytes();
  EXPECT_EQ(write_over_dying_inputs(g), 2);  // and the mul over the dying sum
  dump("after", g);
  for (const Node& n : g.nodes)
    if (n.op == OpId::embedding_backward_add) EXPECT_EQ(n.overwrites, 2);  // base
  EXPECT_EQ(before - g.peak_intermediate_bytes(), size_t(64 * 8 * 4));
  size_t plain_over = 0, over = 0;
  const size_t plain = planned_arena(unmarked, {dy, dh, h, ids}, eager, 1e-6, &plain_over);
  const size_t shared = planned_arena(g, {dy, dh, h, ids}, eager, 1e-6, &over);
  EXPECT_EQ(plain_over, 0u);
  EXPECT_EQ(over, 2u);
  EXPECT_EQ(plain - shared, size_t(64 * 8 * 4));
}

// The output layer and its loss: linear -> cross entropy (ignored rows) -> its backward becomes
// one op at the loss; the seed must be known at the loss (a folded constant, or made after it by
// one op over values that exist before it: that op moves before the loss), and logits read
// elsewhere keep it unfused. Where the gradient's two matmuls (dx = dlogits W, dW = dlogits^T h)
// alone read dlogits, they join it (linear_cross_entropy_grads, no dlogits made); where only dW
// is wanted (h without a gradient), linear_cross_entropy makes dlogits and the matmul stays;
// where only dx is (a frozen weight: LoRA's output layer, float32 or bfloat16), dx joins it and
// no dW is made.
TEST(GraphPasses, OutputLayerAndItsLossFuseIntoLinearCrossEntropy) {
  manual_seed(19);
  Tensor h = randn({2, 6, 16}).requires_grad_(true), w = randn({300, 16}).requires_grad_(true);
  Tensor w16 = w.detach().to(DType::bf16);
  Tensor scale = randn({});
  Tensor target = Tensor::from_vector(
      std::vector<int64_t>{4, 299, -100, 0, 17, 17, -100, 250, 3, 9, 100, 1}, {12});
  // variant 0: the loss as it is; 1: the logits also summed; 2: the loss times a state scalar
  // (its seed, scale, made by a node after the loss); 3: as 0 with h needing no gradient; 4: as
  // 0 with w frozen; 5: as 4 with the frozen weight in bfloat16.
  auto step = [&](int variant) {
    return [&, variant] {
      h.zero_grad();
      w.zero_grad();
      h.requires_grad_(variant != 3);
      w.requires_grad_(variant < 4);
      Tensor logits = ops::linear(h, variant == 5 ? w16 : w);
      Tensor loss = ops::cross_entropy(logits.reshape({12, 300}), target, "mean", -100);
      if (variant == 1) loss = ops::add(loss, ops::mul(ops::sum(logits), 1e-3));
      if (variant == 2) loss = ops::mul(loss, scale);
      loss.backward();
      std::vector<Tensor> out{loss};
      if (variant < 4) out.push_back(w.grad());
      if (variant != 3) out.push_back(h.grad());
      return out;
    };
  };
  for (int variant : {0, 1, 2, 3, 4, 5}) {
    SCOPED_TRACE("variant " + std::to_string(variant));
    std::vector<Tensor> eager = step(variant)();
    for (Tensor& t : eager) t = t.clone();
    Graph g =
        capture(step(variant), {target}, {{"h", h}, {"w", w}, {"w16", w16}, {"scale", scale}});
    fold_constants(g);  // the seed of the loss's gradient
    dump("before", g);
    expect_counts(
        g,
        {{OpId::linear, 1}, {OpId::cross_entropy_rows, 1}, {OpId::cross_entropy_rows_backward, 1}});
    const int matmuls = g.count(OpId::matmul);
    EXPECT_EQ(matmuls, variant == 0 || variant == 1 || variant == 2 ? 2 : 1);
    const bool fused = variant != 1, grads = fused && variant != 3;
    FusionCounts counts;
    EXPECT_EQ(fuse_linear_cross_entropy(g, counts), fused ? 1 : 0);
    dump("after", g);
    EXPECT_EQ(g.count(OpId::linear_cross_entropy_grads), grads ? 1 : 0);
    EXPECT_EQ(g.count(OpId::linear_cross_entropy), variant == 3 ? 1 : 0);
    EXPECT_EQ(g.count(OpId::linear), fused ? 0 : 1);
    EXPECT_EQ(g.count(OpId::cross_entropy_rows), fused ? 0 : 1);
    EXPECT_EQ(g.count(OpId::cross_entropy_rows_backward), fused ? 0 : 1);
    EXPECT_EQ(g.count(OpId::matmul), grads ? 0 : matmuls);  // dx (and dW) join it, or stay
    EXPECT_EQ(counts["linear+cross-entropy"], fused ? 1 : 0);
    EXPECT_EQ(counts["output layer gradients"], grads ? 1 : 0);
    for (const Node& n : g.nodes)
      if (n.op == OpId::linear_cross_entropy_grads) {
        EXPECT_EQ(n.get<OpId::linear_cross_entropy_grads>().weight_grad, variant < 4);
        EXPECT_EQ(n.outputs[2] != kNoValue, variant < 4);
        EXPECT_EQ(n.inputs[1].view.dtype, variant == 5 ? DType::bf16 : DType::f32);
      }
    expect_close(replay(g, {target}), eager, 1e-5);
  }
  h.requires_grad_(true);
  w.requires_grad_(true);
}

// A gradient sum of three products (the input gradient of q/k/v projections): each later matmul
// accumulates onto the sum so far (matmul_add), in place where that dies; a product also read
// elsewhere, and a sum whose other term broadcasts, keep their add.
TEST(GraphPasses, GradientSumsAccumulateInTheirMatmuls) {
  manual_seed(21);
  Tensor dq = randn({6, 4}), dk = randn({6, 4}), dv = randn({6, 4}), wq = randn({4, 5}),
         wk = randn({4, 5}), wv = randn({4, 5}), row = randn({5});
  auto fn = [&] {
    Tensor sum =
        ops::add(ops::add(ops::matmul(dq, wq), ops::matmul(dk.t().t(), wk)), ops::matmul(dv, wv));
    Tensor shared = ops::matmul(dq, wk);
    Tensor twice = ops::add(ops::add(ops::matmul(dk, wv), shared), shared);
    Tensor broadcast = ops::add(row, ops::matmul(dv, wq));
    return std::vector<Tensor>{ops::mul(sum, Tensor::scalar(2.0)), twice, broadcast};
  };
  std::vector<Tensor> eager = fn();
  const std::vector<Tensor> in = {dq, dk, dv};
  const test::State state = {{"wq", wq}, {"wk", wk}, {"wv", wv}, {"row", row}};
  Graph g = capture(fn, in, state);
  dump("before", g);
  expect_counts(g, {{OpId::matmul, 6}, {OpId::add, 5}});
  FusionCounts counts;
  EXPECT_EQ(fuse_matmul_add(g, counts), 3);
  dump("after", g);
  EXPECT_EQ(counts["matmul+add"], 3);
  // sum: two of its three products fused; twice: matmul(dk, wv) into the first add (shared is
  // read twice, so its adds stay); broadcast: unfused.
  expect_counts(g, {{OpId::matmul_add, 3}, {OpId::matmul, 3}, {OpId::add, 2}});
  for (const Node& n : g.nodes)
    if (n.op == OpId::matmul_add) EXPECT_EQ(n.fused, "matmul+add");
  expect_close(replay(g, in), eager, 1e-5);
  // In place: the sum so far dies at each of sum's matmul_adds, which write over it (shared is
  // read again after twice's).
  write_over_dying_inputs(g);
  int over = 0;
  for (const Node& n : g.nodes)
    if (n.op == OpId::matmul_add && n.overwrites == 2) ++over;
  EXPECT_EQ(over, 2);
  size_t overwritten = 0;
  planned_arena(g, in, eager, 1e-5, &overwritten);
  EXPECT_GE(overwritten, 2u);
}

// Through every pass (optimize): the elementwise ops between two GEMMs fuse, and a sum of two
// products becomes one matmul_add, but each product stays a GEMM of its own.
TEST(GraphPasses, NeverFusesTwoMatmuls) {
  manual_seed(13);
  Tensor x = randn({8, 8}), w1 = randn({8, 8}), w2 = randn({8, 8}), w3 = randn({8, 8});
  auto fn = [&] {
    Tensor scaled = ops::sigmoid(ops::mul(ops::matmul(x, w1), Tensor::scalar(2.0)));
    Tensor chain = ops::matmul(ops::relu(scaled), w2);
    Tensor sum = ops::add(ops::matmul(x, w3), ops::matmul(chain, w1));
    return std::vector<Tensor>{chain, sum};
  };
  std::vector<Tensor> eager = fn();
  Graph g = capture(fn, {x}, {{"w1", w1}, {"w2", w2}, {"w3", w3}});
  expect_counts(g, {{OpId::matmul, 4}});
  PassReport report = optimize(g);
  dump("after", g);
  EXPECT_EQ(report.fusions["elementwise"], 1);  // mul, sigmoid and relu between the first two
  EXPECT_EQ(report.fusions["matmul+add"], 1);   // one product accumulated onto the other
  expect_counts(g, {{OpId::matmul, 3}, {OpId::matmul_add, 1}});
  expect_close(replay(g, {x}), eager, 1e-5);
}

TEST(GraphPasses, OptimizerUpdatesFuseAcrossParameters) {
  manual_seed(14);
  std::vector<Tensor> params, eager_params, weights;
  for (Shape s : {Shape{8, 4}, Shape{4}, Shape{3, 3, 2}}) {
    Tensor p = Tensor::randn(s).requires_grad_(true);
    params.push_back(p);
    eager_params.push_back(p.detach().clone().requires_grad_(true));
    weights.push_back(Tensor::randn(s));
  }
  auto opt = nn::Momentum(params, 0.1, 0.9);
  auto eager_opt = nn::Momentum(eager_params, 0.1, 0.9);
  // A step: gradients from a loss, then the update (the graph computes the gradients itself).
  auto step = [&](std::vector<Tensor>& ps, nn::Optimizer& o) {
    return [&] {
      Tensor loss = ops::sum(ops::mul(ps[0], weights[0]));
      for (size_t i = 1; i < ps.size(); ++i)
        loss = ops::add(loss, ops::sum(ops::mul(ps[i], weights[i])));
      loss.backward();
      o.step();
      return std::vector<Tensor>{};
    };
  };
  for (int i = 0; i < 2; ++i) {  // two steps: the second uses the velocities
    eager_opt->zero_grad();
    step(eager_params, *eager_opt)();
  }

  opt->zero_grad();
  step(params, *opt)();  // velocities exist from here on; the capture is the second step
  opt->zero_grad();
  test::State state;
  for (size_t i = 0; i < params.size(); ++i) state.push_back({"p" + std::to_string(i), params[i]});
  for (auto& [k, v] : opt->state_dict()) state.push_back({"optimizer." + k, v});
  std::vector<Tensor> before;
  for (auto& p : params) before.push_back(p.detach().clone());
  std::vector<Tensor> velocity_before;
  for (auto& [k, v] : opt->state_dict()) velocity_before.push_back(v.clone());
  Graph g = capture(step(params, *opt), {}, state);
  opt->zero_grad();
  dump("before", g);
  EXPECT_EQ(g.count(OpId::momentum_update), 3);
  FusionCounts counts;
  EXPECT_EQ(fuse_optimizer_updates(g, counts), 1);
  dump("after", g);
  EXPECT_EQ(counts["optimizer"], 1);
  EXPECT_EQ(g.count(OpId::momentum_update), 0);
  EXPECT_EQ(g.count(OpId::multi_momentum_update), 1);
  // Back to the state before the captured step; the replay redoes it.
  for (size_t i = 0; i < params.size(); ++i) params[i].detach().copy_(before[i]);
  size_t k = 0;
  for (auto& [name, v] : opt->state_dict()) v.copy_(velocity_before[k++]);
  replay(g, {});
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_LE(test::max_abs_diff(params[i], eager_params[i]), 1e-6) << i;
}

TEST(GraphPasses, PipelineReportsEveryPass) {
  // Plain layouts, so the op counts are the same on every ISA (on AVX2 oneDNN blocks 8 output
  // channels as nChw8c, and the capture would hold its layout conversions too).
  const bool kept = cpu::keep_layout();
  cpu::set_keep_layout(false);
  struct Restore {
    bool kept;
    ~Restore() { cpu::set_keep_layout(kept); }
  } restore{kept};
  manual_seed(15);
  Tensor x = randn({2, 3, 8, 8}), w = randn({8, 3, 3, 3}), b = randn({8});
  auto fn = [&] {
    Tensor y = ops::relu(ops::conv2d(x, w, b, {.padding = {1, 1}}));
    Tensor unused = ops::exp(y);
    return std::vector<Tensor>{ops::sum(ops::square(ops::sub(y, 1.0)))};
  };
  std::vector<Tensor> eager = fn();
  Graph g = capture(fn, {x}, {{"w", w}, {"b", b}});
  dump("before", g);
  PassReport r = optimize(g);
  dump("after", g);
  EXPECT_EQ(r.ops_before, 7);  // conv, relu, exp, the fill of the scalar 1, sub, square, sum
  EXPECT_EQ(r.constants, 1);
  EXPECT_EQ(r.fusions["conv+relu"], 1);
  EXPECT_EQ(r.fusions["elementwise"], 1);
  EXPECT_EQ(r.dead, 1);
  EXPECT_EQ(r.ops_after, int(g.nodes.size()));
  EXPECT_EQ(r.ops_after, 2);
  // A sum of 1024 squares (~1e4): float32's rounding there is ~1e-3 (the ASan build's unvectorised
  // loop differed from eager by 1.5e-3), so the tolerance is relative.
  expect_close(replay(g, {x}), eager, 1e-6 * (1 + std::abs(eager[0].item())));
}

}  // namespace
}  // namespace zenith::graph
