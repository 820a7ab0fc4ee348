// ops::batch_norm (src/ops/batch_norm.cpp) and its CPU kernels.
#include <cmath>

#include "backend/cpu/onednn_layout.h"
#include "core/dispatch.h"
#include "support/op_check.h"

using namespace zenith;
using namespace zenith::testing;

namespace {

struct BnCase {
  const char* name;
  Shape x;
  bool training, affine, noncontiguous;
};

const std::vector<BnCase> kBnCases = {
    {"train_4d", {3, 4, 3, 3}, true, true, false},
    {"train_no_affine", {3, 4, 3, 3}, true, false, false},
    {"train_2d", {6, 5}, true, true, false},
    {"train_noncontiguous", {2, 3, 4, 3}, true, true, true},
    {"eval_4d", {3, 4, 3, 3}, false, true, false},
    {"eval_3d", {2, 4, 5}, false, true, true},
};

// Inputs: x, weight, bias, running_mean, running_var (running stats never require grad).
std::vector<Tensor> bn_inputs(const BnCase& c) {
  int64_t C = c.x[1];
  return {random_input(c.x, DType::f64, c.noncontiguous),
          c.affine ? random_input({C}, DType::f64, false, 0.5, 1.5) : Tensor(),
          c.affine ? random_input({C}) : Tensor(), random_input({C}),
          random_input({C}, DType::f64, false, 0.5, 1.5)};
}

OpFn bn_fn(bool training) {
  return [training](const std::vector<Tensor>& x) {
    return ops::batch_norm(x[0], x[1], x[2], x[3], x[4], training, 0.1, 1e-5);
  };
}

}  // namespace

TEST(BatchNorm, ForwardAndGradients) {
  for (auto& c : kBnCases) {
    SCOPED_TRACE(c.name);
    auto in = bn_inputs(c);
    EXPECT_TRUE(forward_matches_f64(bn_fn(c.training), in, 1e-4, 1e-4));
    for (int i = 0; i < 3; ++i)
      if (in[size_t(i)].defined()) in[size_t(i)].requires_grad_();
    EXPECT_TRUE(gradcheck(bn_fn(c.training), in, 1e-6, 1e-4, 1e-5));
    EXPECT_TRUE(backward_matches_f64(bn_fn(c.training), in));
  }
}

TEST(BatchNorm, LoopsMatchOnednnInFloat32) {
  Tensor x = Tensor::randn({4, 8, 5, 5}), w = Tensor::rand({8}), b = Tensor::randn({8});
  Tensor rm = Tensor::zeros({8}), rv = Tensor::ones({8});
  for (bool training : {true, false}) {
    BatchNormAttrs a{.training = training, .momentum = 0.1, .eps = 1e-5};
    a.impl = BatchNormImpl::kOnednn;
    auto dnn = dispatch::call<OpId::batch_norm>({x, w, b, rm.clone(), rv.clone()}, a);
    a.impl = BatchNormImpl::kLoops;
    auto loops = dispatch::call<OpId::batch_norm>({x, w, b, rm.clone(), rv.clone()}, a);
    EXPECT_TRUE(all_close(dnn[0], loops[0], 1e-4, 1e-4));
    Tensor dy = Tensor::randn(x.shape());
    auto gl = dispatch::call<OpId::batch_norm_backward>({dy, x, w, loops[1], loops[2]}, a);
    a.impl = BatchNormImpl::kOnednn;
    auto gd = dispatch::call<OpId::batch_norm_backward>({dy, x, w, dnn[1], dnn[2]}, a);
    for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(all_close(gd[i], gl[i], 1e-4, 1e-4)) << i;
  }
}

TEST(BatchNorm, BlockedLoopsMatchOnednn) {
  // A blocked activation (32 channels: oneDNN's nChw16c or nChw8c).
  Tensor x = ops::conv2d(Tensor::randn({4, 8, 7, 7}), Tensor::randn({32, 8, 3, 3}));
  Tensor dy = ops::conv2d(Tensor::randn({4, 8, 7, 7}), Tensor::randn({32, 8, 3, 3}));
  ASSERT_TRUE(x.has_layout());
  Tensor w = Tensor::rand({32}), b = Tensor::randn({32});
  for (bool training : {true, false}) {
    SCOPED_TRACE(training ? "training" : "eval");
    Tensor rm = Tensor::randn({32}), rv = Tensor::rand({32}) + 0.5;
    BatchNormAttrs a{.training = training, .momentum = 0.1, .eps = 1e-5};
    Tensor rm1 = rm.clone(), rv1 = rv.clone();
    auto loops = dispatch::call<OpId::batch_norm>({x, w, b, rm1, rv1}, a);
    EXPECT_TRUE(cpu::same_layout(loops[0], x));
    auto gl = dispatch::call<OpId::batch_norm_backward>({dy, x, w, loops[1], loops[2]}, a);
    EXPECT_TRUE(cpu::same_layout(gl[0], x));
    a.impl = BatchNormImpl::kOnednn;
    Tensor rm2 = rm.clone(), rv2 = rv.clone();
    auto dnn = dispatch::call<OpId::batch_norm>({x, w, b, rm2, rv2}, a);
    auto gd = dispatch::call<OpId::batch_norm_backward>({dy, x, w, dnn[1], dnn[2]}, a);
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_TRUE(all_close(loops[i], dnn[i], 1e-4, 1e-4)) << "forward output " << i;
      EXPECT_TRUE(all_close(gl[i], gd[i], 1e-3, 1e-3)) << "gradient " << i;
    }
    EXPECT_TRUE(all_close(rm1, rm2, 1e-5, 1e-5));
    EXPECT_TRUE(all_close(rv1, rv2, 1e-5, 1e-5));
  }
}

TEST(BatchNorm, RunningStatsFollowPyTorchConvention) {
  for (DType dtype : {DType::f64, DType::f32}) {
    SCOPED_TRACE(dtype_name(dtype));
    const int64_t N = 4, C = 3, HW = 6;
    Tensor x = Tensor::randn({N, C, 2, 3}, dtype);
    Tensor rm = Tensor::uniform({C}, -1, 1, dtype), rv = Tensor::uniform({C}, 0.5, 1.5, dtype);
    auto xv = x.to_double_vector(), m0 = rm.to_double_vector(), v0 = rv.to_double_vector();
    const double momentum = 0.3;
    ops::batch_norm(x, Tensor(), Tensor(), rm, rv, true, momentum, 1e-5);
    auto m1 = rm.to_double_vector(), v1 = rv.to_double_vector();
    for (int64_t c = 0; c < C; ++c) {
      double s = 0, ss = 0;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < HW; ++i) s += xv[size_t((n * C + c) * HW + i)];
      double mean = s / double(N * HW);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < HW; ++i) {
          double d = xv[size_t((n * C + c) * HW + i)] - mean;
          ss += d * d;
        }
      double unbiased = ss / double(N * HW - 1);
      double tol = dtype == DType::f64 ? 1e-12 : 1e-5;
      EXPECT_NEAR(m1[size_t(c)], (1 - momentum) * m0[size_t(c)] + momentum * mean, tol);
      EXPECT_NEAR(v1[size_t(c)], (1 - momentum) * v0[size_t(c)] + momentum * unbiased, tol);
    }
    // Eval mode reads them and leaves them alone.
    Tensor y = ops::batch_norm(x, Tensor(), Tensor(), rm, rv, false, momentum, 1e-5);
    EXPECT_EQ(rm.to_double_vector(), m1);
    double want = (xv[0] - m1[0]) / std::sqrt(v1[0] + 1e-5);
    EXPECT_NEAR(y.to_double_vector()[0], want, dtype == DType::f64 ? 1e-12 : 1e-5);
  }
}

TEST(BatchNorm, Errors) {
  Tensor x = Tensor::zeros({2, 3, 4, 4});
  EXPECT_TRUE(throws_with(
      [&] { ops::batch_norm(x, Tensor::ones({4}), Tensor(), Tensor(), Tensor(), true); },
      "[batch_norm] expected weight [3], got [4] (input [2, 3, 4, 4])"));
  EXPECT_TRUE(
      throws_with([&] { ops::batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), false); },
                  "[batch_norm] eval mode needs running_mean and running_var"));
  EXPECT_TRUE(throws_with(
      [&] {
        ops::batch_norm(Tensor::zeros({1, 3}), Tensor(), Tensor(), Tensor(), Tensor(), true);
      },
      "[batch_norm] training needs more than 1 value per channel"));
}

TEST(BlockedChain, ConvPoolBatchNormSameWithOrWithoutLayouts) {
  // conv (blocked out) -> max pool -> batch norm -> conv -> avg pool, forward and backward.
  Tensor x = Tensor::randn({4, 3, 12, 12});
  Tensor w1 = Tensor::randn({16, 3, 3, 3}), w2 = Tensor::randn({32, 16, 3, 3});
  Tensor gamma = Tensor::rand({16}), beta = Tensor::randn({16});
  std::vector<std::vector<Tensor>> results;
  for (bool keep : {true, false}) {
    cpu::set_keep_layout(keep);
    std::vector<Tensor> p = {w1.detach().clone().requires_grad_(),
                             w2.detach().clone().requires_grad_(),
                             gamma.detach().clone().requires_grad_()};
    Tensor rm = Tensor::zeros({16}), rv = Tensor::ones({16});
    Tensor h = ops::conv2d(x, p[0], Tensor(), {.padding = {1, 1}});
    EXPECT_EQ(h.has_layout(), keep);
    h = ops::max_pool2d(h, {2});
    h = ops::batch_norm(h, p[2], beta, rm, rv, true);
    EXPECT_EQ(h.has_layout(), keep);
    h = ops::conv2d(h, p[1]);
    h = ops::avg_pool2d(h, {2});
    Tensor loss = ops::sum(ops::mul(h, h));
    loss.backward();
    results.push_back({h.contiguous(), p[0].grad(), p[1].grad(), p[2].grad(), rm, rv});
  }
  cpu::set_keep_layout(true);
  for (size_t i = 0; i < results[0].size(); ++i)
    EXPECT_TRUE(all_close(results[0][i], results[1][i], 1e-4, 1e-3)) << "result " << i;
}

TEST(BatchNorm, SecondDerivatives) {
  for (bool training : {true, false}) {
    SCOPED_TRACE(training ? "training" : "eval");
    auto in = bn_inputs({"small", {3, 2, 2, 2}, training, true, false});
    for (int i = 0; i < 3; ++i) in[size_t(i)].requires_grad_();
    EXPECT_TRUE(gradgradcheck(bn_fn(training), in, 1e-6, 1e-4, 1e-5));
  }
}
