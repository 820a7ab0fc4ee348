#include "backend/cpu/max_pool_2x2.h"
#include "backend/cpu/onednn_layout.h"
#include "core/dispatch.h"
#include "support/op_check.h"

using namespace zenith;
using namespace zenith::testing;

namespace {

struct PoolCase {
  const char* name;
  Shape x;
  std::vector<int64_t> kernel, stride, padding;
  bool noncontiguous = false;
};

const std::vector<PoolCase> kCases = {
    {"k2", {2, 3, 6, 6}, {2}, {}, {0}},
    {"k3_s2_p1", {2, 3, 7, 7}, {3}, {2}, {1}},
    {"rect", {1, 2, 6, 7}, {2, 3}, {1, 2}, {1, 1}},
    {"overlap_s1", {1, 2, 5, 5}, {3}, {1}, {0}},
    {"odd_floor", {1, 2, 7, 5}, {2}, {2}, {0}, true},
};

void check_pool(const std::function<Tensor(const Tensor&, const PoolCase&)>& pool) {
  for (auto& c : kCases) {
    SCOPED_TRACE(c.name);
    OpFn f = [&](const std::vector<Tensor>& x) { return pool(x[0], c); };
    std::vector<Tensor> in = {random_input(c.x, DType::f64, c.noncontiguous)};
    EXPECT_TRUE(forward_matches_f64(f, in));
    in[0].requires_grad_();
    EXPECT_TRUE(gradcheck(f, in));
    EXPECT_TRUE(backward_matches_f64(f, in));
  }
}

}  // namespace

TEST(MaxPool2d, ForwardAndGradients) {
  check_pool([](const Tensor& x, const PoolCase& c) {
    return ops::max_pool2d(x, c.kernel, c.stride, c.padding);
  });
}

TEST(AvgPool2d, ForwardAndGradientsIncludingPad) {
  check_pool([](const Tensor& x, const PoolCase& c) {
    return ops::avg_pool2d(x, c.kernel, c.stride, c.padding, true);
  });
}

TEST(AvgPool2d, ForwardAndGradientsExcludingPad) {
  check_pool([](const Tensor& x, const PoolCase& c) {
    return ops::avg_pool2d(x, c.kernel, c.stride, c.padding, false);
  });
}

TEST(AdaptiveAvgPool2d, ForwardAndGradients) {
  struct Case {
    Shape x;
    std::vector<int64_t> out;
  };
  for (auto c : std::vector<Case>{{{2, 3, 6, 6}, {3}},
                                  {{2, 3, 5, 7}, {3, 2}},
                                  {{2, 3, 4, 4}, {1, 1}},
                                  {{1, 2, 3, 3}, {5}}}) {
    SCOPED_TRACE(shape_str(c.x) + " -> " + shape_str(c.out));
    OpFn f = [&](const std::vector<Tensor>& x) { return ops::adaptive_avg_pool2d(x[0], c.out); };
    std::vector<Tensor> in = {random_input(c.x, DType::f64)};
    EXPECT_TRUE(forward_matches_f64(f, in));
    in[0].requires_grad_();
    EXPECT_TRUE(gradcheck(f, in));
    EXPECT_TRUE(backward_matches_f64(f, in));
  }
}

TEST(Pool2d, HandComputedValues) {
  std::vector<float> v(16);
  for (int i = 0; i < 16; ++i) v[size_t(i)] = float(i);
  Tensor x = Tensor::from_vector(v, {1, 1, 4, 4});
  EXPECT_EQ(ops::max_pool2d(x, {2}).to_float_vector(), (std::vector<float>{5, 7, 13, 15}));
  EXPECT_EQ(ops::avg_pool2d(x, {2}).to_float_vector(), (std::vector<float>{2.5, 4.5, 10.5, 12.5}));
  // Corner window with pad 1: {0} alone; include_pad divides by 4, exclude by 1.
  EXPECT_EQ(ops::avg_pool2d(x, {2}, {2}, {1}, true).to_float_vector()[0], 0.f);
  EXPECT_EQ(ops::avg_pool2d(x, {2}, {2}, {1}, true).to_float_vector()[1], (1.f + 2.f) / 4.f);
  EXPECT_EQ(ops::avg_pool2d(x, {2}, {2}, {1}, false).to_float_vector()[1], (1.f + 2.f) / 2.f);
  EXPECT_EQ(ops::adaptive_avg_pool2d(x, {1}).to_float_vector(), (std::vector<float>{7.5f}));
}

TEST(Pool2d, BlockedInputStaysBlockedAndMatchesPlain) {
  Tensor x = Tensor::randn({2, 16, 8, 8}), w = Tensor::randn({32, 16, 3, 3});
  Tensor y = ops::conv2d(x, w);
  ASSERT_TRUE(y.has_layout());
  Tensor plain_y = y.contiguous();
  Tensor pooled = ops::max_pool2d(y, {2});
  EXPECT_TRUE(pooled.has_layout());
  EXPECT_TRUE(all_close(pooled, ops::max_pool2d(plain_y, {2}), 0, 0));
  EXPECT_TRUE(all_close(ops::avg_pool2d(y, {3}, {2}, {1}), ops::avg_pool2d(plain_y, {3}, {2}, {1}),
                        1e-6, 1e-6));
  EXPECT_TRUE(all_close(ops::adaptive_avg_pool2d(y, {1}), ops::adaptive_avg_pool2d(plain_y, {1}),
                        1e-5, 1e-6));
}

TEST(Pool2d, BackwardOfBlockedPoolMatchesPlain) {
  Tensor x = Tensor::randn({2, 16, 8, 8});
  Tensor w = Tensor::randn({32, 16, 3, 3});
  std::vector<Tensor> grads;
  for (bool keep : {true, false}) {
    cpu::set_keep_layout(keep);
    Tensor wg = w.detach().clone().requires_grad_();
    Tensor y = ops::max_pool2d(ops::conv2d(x, wg), {2});
    ops::sum(ops::mul(y, y)).backward();
    grads.push_back(wg.grad());
  }
  cpu::set_keep_layout(true);
  EXPECT_TRUE(all_close(grads[0], grads[1], 1e-5, 1e-4));
}

TEST(MaxPool2d, Avx2FastPathMatchesFloat64) {
  // zenith's 2x2 stride-2 max pooling on nChw8c ("auto" uses it where oneDNN lacks AVX-512)
  // against the float64 reference, forward and backward: even and odd sizes (a row and a column
  // in no window), a strided input, and ties (small integers: the first maximum gets dy).
  std::vector<double> ties(2 * 8 * 6 * 6);
  for (size_t i = 0; i < ties.size(); ++i) ties[i] = double((i * 7) % 5);
  const std::vector<std::pair<const char*, Tensor>> inputs = {
      {"even", random_input({2, 16, 6, 6})},
      {"odd", random_input({1, 8, 7, 5})},
      {"strided", random_input({2, 8, 4, 6}, DType::f64, true)},
      {"ties", Tensor::from_vector(ties, {2, 8, 6, 6})},
  };
  OpFn f = [](const std::vector<Tensor>& x) { return ops::max_pool2d(x[0], {2}); };
  for (const char* mode : {"on", "off"})
    for (bool keep : {true, false})
      for (auto& [name, x] : inputs) {
        SCOPED_TRACE(std::string(name) + " mode " + mode + (keep ? " blocked" : " plain"));
        cpu::set_avx2_fast_paths(mode);
        cpu::set_keep_layout(keep);
        std::vector<Tensor> in = {x.detach().clone().requires_grad_()};
        EXPECT_TRUE(forward_matches_f64(f, in, 1e-6, 1e-7));  // float32 rounding only
        EXPECT_TRUE(backward_matches_f64(f, in, 1e-6, 1e-6));
      }
  cpu::set_keep_layout(true);
  // A workspace from oneDNN's kernel reaching the fast path's backward is refused.
  cpu::set_avx2_fast_paths("off");
  Tensor x = Tensor::randn({1, 8, 4, 4}).requires_grad_();
  Tensor y = ops::max_pool2d(x, {2});
  cpu::set_avx2_fast_paths("on");
  EXPECT_TRUE(
      throws_with([&] { ops::sum(y).backward(); }, "the workspace is not the AVX2 fast path's"));
  cpu::set_avx2_fast_paths("auto");
}

TEST(MaxPool2d, ReluFusedKernelsMatchFloat64) {
  // graph mode's max_pool2d_relu / max_pool2d_relu_backward kernel (zenith's 2x2 stride-2
  // pooling with the relu in its loops) on nChw8c and nChw16c against relu(max_pool2d(x)) and its
  // gradient in float64: even and odd sizes, ties, and a window whose maximum is <= 0.
  std::vector<double> ties(2 * 16 * 6 * 6);
  for (size_t i = 0; i < ties.size(); ++i) ties[i] = double(int((i * 7) % 5) - 2);
  const std::vector<std::pair<const char*, Tensor>> inputs = {
      {"even", random_input({2, 16, 6, 6})},
      {"odd", random_input({1, 16, 7, 5})},
      {"ties", Tensor::from_vector(ties, {2, 16, 6, 6})},
  };
  for (int block : {8, 16})
    for (auto& [name, x64] : inputs) {
      SCOPED_TRACE(std::string(name) + " block " + std::to_string(block));
      const Shape& xs = x64.shape();
      const Pool2dAttrs a{.kernel = {2, 2},
                          .stride = {2, 2},
                          .padding = {0, 0},
                          .output_size = {xs[2] / 2, xs[3] / 2},
                          .training = true};
      Tensor dy64 = random_input({xs[0], xs[1], xs[2] / 2, xs[3] / 2});
      Tensor x_ref = x64.detach().clone().requires_grad_();
      Tensor y_ref = ops::relu(ops::max_pool2d(x_ref, {2}));
      ops::sum(ops::mul(y_ref, dy64)).backward();

      ASSERT_TRUE(cpu::max_pool_2x2_fits(xs, a, DType::f32));
      std::vector<Tensor> f = cpu::max_pool_2x2(x64.to(DType::f32), a, block, true);
      EXPECT_TRUE(cpu::is_max_pool_2x2_workspace(f[1], xs, a, /*relu=*/true));
      EXPECT_FALSE(cpu::is_max_pool_2x2_workspace(f[1], xs, a, /*relu=*/false));
      Tensor dx = cpu::max_pool_2x2_backward(dy64.to(DType::f32), f[1], xs, a);
      auto plain = [](const Tensor& t) { return dispatch::call1<OpId::to_plain>({t}); };
      EXPECT_TRUE(all_close(plain(f[0]).to(DType::f64), y_ref.detach(), 1e-6, 1e-7));
      EXPECT_TRUE(all_close(plain(dx).to(DType::f64), x_ref.grad(), 1e-6, 1e-6));
      // The ops through the dispatcher: the same kernel picks its block from x's format.
      std::vector<Tensor> g = dispatch::call<OpId::max_pool2d_relu>({x64.to(DType::f32)}, a);
      Tensor dxg = dispatch::call1<OpId::max_pool2d_relu_backward>(
          {dy64.to(DType::f32), x64.to(DType::f32), g[1]}, a);
      EXPECT_TRUE(all_close(plain(dxg).to(DType::f64), x_ref.grad(), 1e-6, 1e-6));
    }
  // Other windows: the decomposition, which reads x (a shape-only stand-in is refused by name).
  const Pool2dAttrs a3{.kernel = {3, 3},
                       .stride = {2, 2},
                       .padding = {1, 1},
                       .output_size = {3, 3},
                       .training = true};
  Tensor x = Tensor::randn({1, 8, 6, 6}), dy = Tensor::randn({1, 8, 3, 3});
  std::vector<Tensor> f = dispatch::call<OpId::max_pool2d_relu>({x}, a3);
  Tensor x_ref = x.to(DType::f64).requires_grad_();
  Tensor y_ref = ops::relu(ops::max_pool2d(x_ref, {3}, {2}, {1}));
  ops::sum(ops::mul(y_ref, dy.to(DType::f64))).backward();
  Tensor dx = dispatch::call1<OpId::max_pool2d_relu_backward>({dy, x, f[1]}, a3);
  EXPECT_TRUE(
      all_close(dispatch::call1<OpId::to_plain>({dx}).to(DType::f64), x_ref.grad(), 1e-6, 1e-6));
  auto impl = std::make_shared<TensorImpl>();  // as ops::max_pool2d's backward passes x
  impl->storage = std::make_shared<Storage>(nullptr, 0, x.device(), [] {});
  impl->shape = x.shape();
  impl->strides = x.strides();
  impl->device = x.device();
  Tensor stand_in(std::move(impl));
  EXPECT_TRUE(throws_with(
      [&] {
        dispatch::call<OpId::max_pool2d_relu_backward>({dy, stand_in, f[1]}, a3);
      },
      "[max_pool2d_relu_backward] the decomposition reads x's values"));
}

TEST(Pool2d, Errors) {
  Tensor x = Tensor::zeros({1, 2, 4, 4});
  EXPECT_TRUE(throws_with(
      [&] {
        ops::max_pool2d(Tensor::zeros({2, 4, 4}), {2});
      },
      "[max_pool2d] expected a 4-d input [N, C, H, W], got [2, 4, 4]"));
  EXPECT_TRUE(throws_with([&] { ops::max_pool2d(x, {5}); },
                          "[max_pool2d] input [1, 2, 4, 4] is smaller than the kernel [5, 5]"));
  EXPECT_TRUE(throws_with([&] { ops::avg_pool2d(x, {2}, {2}, {2}); },
                          "[avg_pool2d] padding [2, 2] must be at most half the kernel [2, 2]"));
  EXPECT_TRUE(throws_with([&] { ops::max_pool2d(x, {0}); }, "[max_pool2d] kernel must be >= 1"));
  EXPECT_TRUE(throws_with(
      [&] {
        ops::adaptive_avg_pool2d(x, {1, 2, 3});
      },
      "[adaptive_avg_pool2d] output_size needs 1 or 2 values"));
  EXPECT_TRUE(throws_with(
      [&] {
        ops::max_pool2d(Tensor::zeros({1, 1, 4, 4}, DType::i64), {2});
      },
      "[max_pool2d] expected float32 or float64, got int64"));
}

TEST(Pool, SecondDerivatives) {
  Tensor x = random_input({1, 2, 5, 5}, DType::f64).requires_grad_();
  EXPECT_TRUE(gradgradcheck(
      [](auto& in) { return ops::square(ops::max_pool2d(in[0], {3}, {2}, {1})); }, {x}));
  EXPECT_TRUE(gradgradcheck(
      [](auto& in) { return ops::square(ops::avg_pool2d(in[0], {2}, {2}, {1}, false)); }, {x}));
  EXPECT_TRUE(gradgradcheck(
      [](auto& in) {
        return ops::square(ops::adaptive_avg_pool2d(in[0], {3, 2}));
      },
      {x}));
}
