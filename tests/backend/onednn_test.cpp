#include <thread>

#include "backend/cpu/onednn_layout.h"
#include "core/dispatch.h"
#include "support/op_check.h"

using namespace zenith;
using namespace zenith::testing;

namespace {

// A blocked activation: conv with 32 output channels (oneDNN picks nChw16c / nChw8c).
Tensor blocked_activation(Shape x = {2, 16, 6, 6}) {
  Tensor y = ops::conv2d(Tensor::randn(x), Tensor::randn({32, x[1], 3, 3}));
  EXPECT_TRUE(y.has_layout());
  return y;
}

}  // namespace

TEST(Onednn, PrimitiveCacheHitsOnRepeatedShape) {
  Tensor x = Tensor::randn({3, 5, 9, 9}), w = Tensor::randn({7, 5, 3, 3});
  ops::conv2d(x, w);  // first call creates (or finds) the primitive
  cpu::reset_onednn_stats();
  for (int i = 0; i < 5; ++i) ops::conv2d(x, w);
  cpu::OnednnStats s = cpu::onednn_stats();
  EXPECT_EQ(s.cache_misses, 0);
  EXPECT_GE(s.cache_hits, 5);
  // A new shape is a miss, then a hit.
  Tensor x2 = Tensor::randn({3, 5, 11, 9});
  cpu::reset_onednn_stats();
  ops::conv2d(x2, w);
  EXPECT_GE(cpu::onednn_stats().cache_misses, 1);
  cpu::reset_onednn_stats();
  ops::conv2d(x2, w);
  EXPECT_EQ(cpu::onednn_stats().cache_misses, 0);
}

TEST(Onednn, ToPlainRoundTrip) {
  Tensor y = blocked_activation();
  EXPECT_FALSE(y.is_contiguous());
  EXPECT_TRUE(throws_with([&] { y.raw_data(); }, "backend layout"));
  Tensor p = dispatch::call1<OpId::to_plain>({y});
  EXPECT_FALSE(p.has_layout());
  EXPECT_TRUE(p.is_contiguous());
  EXPECT_EQ(p.shape(), y.shape());
  // Same values through every plain path: contiguous(), clone(), to(), views.
  EXPECT_TRUE(all_close(y.contiguous(), p, 0, 0));
  EXPECT_TRUE(all_close(y.clone(), p, 0, 0));
  EXPECT_TRUE(all_close(y.to(DType::f64), p.to(DType::f64), 0, 0));
  EXPECT_TRUE(all_close(y.flatten(1), p.flatten(1), 0, 0));
  EXPECT_TRUE(all_close(y.slice(1, 3, 9), p.slice(1, 3, 9), 0, 0));
}

TEST(Onednn, FlatPhysicalViewRoundTrip) {
  Tensor y = blocked_activation();
  Tensor flat = cpu::flat_physical(y);
  EXPECT_EQ(flat.shape(), Shape{y.numel()});
  EXPECT_FALSE(flat.has_layout());
  // An elementwise op on the flat view, re-wrapped, equals the op on the logical tensor.
  Tensor doubled = cpu::with_layout_of(ops::mul(flat, 2.0), y);
  EXPECT_TRUE(doubled.has_layout());
  EXPECT_TRUE(cpu::same_layout(doubled, y));
  EXPECT_TRUE(all_close(doubled, ops::mul(y.contiguous(), 2.0), 0, 0));
  EXPECT_FALSE(cpu::same_layout(y, y.contiguous()));
}

TEST(Onednn, KernelsThatAreNotLayoutAwareGetPlainInputs) {
  Tensor y = blocked_activation();
  Tensor p = y.contiguous();
  // sum and exp are not layout-aware: the dispatcher reorders their inputs to plain.
  EXPECT_TRUE(all_close(ops::sum(y), ops::sum(p), 1e-6, 1e-5));
  EXPECT_TRUE(all_close(ops::exp(y), ops::exp(p), 0, 0));
  EXPECT_TRUE(all_close(ops::div(y, y), ops::div(p, p), 0, 0));
}

TEST(Onednn, LayoutAwareElementwiseKeepsTheLayout) {
  Tensor y = blocked_activation(), z = blocked_activation();
  Tensor yp = y.contiguous(), zp = z.contiguous();
  cpu::reset_onednn_stats();
  Tensor r = ops::relu(y);
  Tensor s = ops::add(y, z);
  Tensor m = ops::mul(y, 0.5);
  EXPECT_EQ(cpu::onednn_stats().reorders, 0);
  for (const Tensor* t : {&r, &s, &m}) EXPECT_TRUE(cpu::same_layout(*t, y));
  EXPECT_TRUE(all_close(r, ops::relu(yp), 0, 0));
  EXPECT_TRUE(all_close(s, ops::add(yp, zp), 0, 0));
  EXPECT_TRUE(all_close(m, ops::mul(yp, 0.5), 0, 0));
  // A plain operand of the same shape is reordered into the layout (one reorder).
  cpu::reset_onednn_stats();
  Tensor mixed = ops::sub(zp, y);
  EXPECT_EQ(cpu::onednn_stats().reorders, 1);
  EXPECT_TRUE(cpu::same_layout(mixed, y));
  EXPECT_TRUE(all_close(mixed, ops::sub(zp, yp), 0, 0));
  // Broadcasting operands fall back to plain.
  Tensor bias = Tensor::randn({32, 1, 1});
  Tensor b = ops::add(y, bias);
  EXPECT_FALSE(b.has_layout());
  EXPECT_TRUE(all_close(b, ops::add(yp, bias), 0, 0));
}

TEST(Onednn, ReluBackwardOnBlockedActivations) {
  Tensor x = Tensor::randn({2, 16, 6, 6});
  std::vector<Tensor> grads;
  for (bool keep : {true, false}) {
    cpu::set_keep_layout(keep);
    Tensor w = Tensor::randn({32, 16, 3, 3});
    manual_seed(3);
    w = Tensor::randn({32, 16, 3, 3}).requires_grad_();
    Tensor h = ops::relu(ops::conv2d(x, w));
    EXPECT_EQ(h.has_layout(), keep);
    Tensor out = ops::add(ops::max_pool2d(h, {2}), 1.0);
    ops::sum(ops::mul(out, out)).backward();
    grads.push_back(w.grad());
  }
  cpu::set_keep_layout(true);
  EXPECT_TRUE(all_close(grads[0], grads[1], 1e-5, 1e-4));
}

TEST(Onednn, ReordersAreCounted) {
  Tensor y = blocked_activation();
  cpu::reset_onednn_stats();
  y.contiguous();
  y.contiguous();
  EXPECT_EQ(cpu::onednn_stats().reorders, 2);
  EXPECT_GE(cpu::onednn_stats().reorder_ms, 0.0);
}

TEST(Onednn, LayoutsOffGivesPlainOutputs) {
  cpu::set_keep_layout(false);
  Tensor y = ops::conv2d(Tensor::randn({2, 16, 6, 6}), Tensor::randn({32, 16, 3, 3}));
  Tensor z = ops::max_pool2d(y, {2});
  cpu::set_keep_layout(true);
  EXPECT_FALSE(y.has_layout());
  EXPECT_FALSE(z.has_layout());
}

TEST(Onednn, PaddedBlockedFormatsAreNotKept) {
  // 6 output channels would pad to a block of 8/16: returned plain so flat views stay valid.
  Tensor y = ops::conv2d(Tensor::randn({2, 16, 6, 6}), Tensor::randn({6, 16, 3, 3}));
  EXPECT_FALSE(y.has_layout());
}

// A Winograd convolution whose shape was first run on another (finished) thread runs on this one
// and gives the same values: primitives are cached per thread (oneDNN's library scratchpad
// belongs to the creating thread; sharing the primitive crashed once that thread had exited).
TEST(Onednn, PrimitivesDoNotCrossThreads) {
  context::set_num_threads(2);
  Tensor x = Tensor::randn({8, 64, 10, 10}), w = Tensor::randn({64, 64, 3, 3});
  Tensor on_worker;
  std::thread worker([&] {
    context::set_num_threads(2);
    on_worker = ops::conv2d(x, w, Tensor(), {.padding = {1, 1}}).contiguous();
  });
  worker.join();
  cpu::reset_onednn_stats();
  Tensor here = ops::conv2d(x, w, Tensor(), {.padding = {1, 1}});
  EXPECT_GE(cpu::onednn_stats().cache_misses, 1) << "this thread made its own primitive";
  EXPECT_TRUE(all_close(here.contiguous(), on_worker, 0, 0));
}
