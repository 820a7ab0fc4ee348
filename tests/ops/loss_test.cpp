#include <cmath>

#include "support/op_check.h"

using namespace zenith;
using namespace zenith::testing;

namespace {

// log_softmax of row i of a [rows, C] host matrix, in float64.
std::vector<double> ref_log_softmax(const std::vector<double>& x, int64_t i, int64_t c) {
  double m = -INFINITY, s = 0;
  for (int64_t k = 0; k < c; ++k) m = std::max(m, x[size_t(i * c + k)]);
  for (int64_t k = 0; k < c; ++k) s += std::exp(x[size_t(i * c + k)] - m);
  std::vector<double> out;
  for (int64_t k = 0; k < c; ++k) out.push_back(x[size_t(i * c + k)] - m - std::log(s));
  return out;
}

// PyTorch's definition for class indices, written out: per-sample
//   (1 - eps) * -logp[t] + eps / C * -sum_c logp[c], 0 where t == ignore;
// mean divides by the number of non-ignored samples.
double ref_cross_entropy(const std::vector<double>& x, const std::vector<int64_t>& t, int64_t c,
                         const std::string& reduction, int64_t ignore, double eps,
                         std::vector<double>* per_sample = nullptr) {
  double total = 0;
  int64_t count = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    double l = 0;
    if (t[i] != ignore) {
      auto lp = ref_log_softmax(x, int64_t(i), c);
      double smooth = 0;
      for (double v : lp) smooth -= v;
      l = (1 - eps) * -lp[size_t(t[i])] + eps / double(c) * smooth;
      ++count;
    }
    if (per_sample) per_sample->push_back(l);
    total += l;
  }
  return reduction == "mean" ? total / double(count) : total;
}

}  // namespace

TEST(Loss, CrossEntropyClassIndices) {
  Tensor target = Tensor::from_vector(std::vector<int64_t>{1, 0, 4, 4, 2, 3}, {6});
  for (std::string red : {"mean", "sum", "none"})
    for (double eps : {0.0, 0.1})
      for (int64_t ignore : {int64_t(-100), int64_t(4)})
        for (bool nc : {false, true}) {
          SCOPED_TRACE(red + " eps " + std::to_string(eps) + " ignore " + std::to_string(ignore));
          auto f = [&](const std::vector<Tensor>& x) {
            return ops::cross_entropy(x[0], target, red, ignore, eps);
          };
          std::vector<Tensor> in = {random_input({6, 5}, DType::f64, nc, -3, 3)};
          EXPECT_TRUE(forward_matches_f64(f, in));
          in[0].requires_grad_();
          EXPECT_TRUE(gradcheck(f, in));
          EXPECT_TRUE(backward_matches_f64(f, in));
        }
}

TEST(Loss, CrossEntropyMatchesHandFormula) {
  Tensor logits = random_input({5, 4}, DType::f64, false, -3, 3);
  std::vector<int64_t> t = {3, 0, -100, 1, 3};
  Tensor target = Tensor::from_vector(t, {5});
  auto x = logits.to_double_vector();
  for (double eps : {0.0, 0.25}) {
    for (std::string red : {"mean", "sum"}) {
      double want = ref_cross_entropy(x, t, 4, red, -100, eps);
      EXPECT_NEAR(ops::cross_entropy(logits, target, red, -100, eps).item(), want, 1e-12);
      // float32 through the fused kernel
      EXPECT_NEAR(ops::cross_entropy(logits.to(DType::f32), target, red, -100, eps).item(), want,
                  1e-5);
    }
    std::vector<double> per;
    ref_cross_entropy(x, t, 4, "none", -100, eps, &per);
    EXPECT_TRUE(all_close(ops::cross_entropy(logits, target, "none", -100, eps),
                          Tensor::from_vector(per, {5}), 1e-12, 1e-12));
  }
  // The gradient of the mean: (softmax - q) / count, zero rows where ignored.
  Tensor xg = logits.detach().requires_grad_();
  const double eps = 0.25;
  ops::cross_entropy(xg, target, "mean", -100, eps).backward();
  auto g = xg.grad().to_double_vector();
  for (int64_t i = 0; i < 5; ++i) {
    auto lp = ref_log_softmax(x, i, 4);
    for (int64_t k = 0; k < 4; ++k) {
      double want = 0;
      if (t[size_t(i)] != -100)
        want = (std::exp(lp[size_t(k)]) - (k == t[size_t(i)] ? 1 - eps : 0) - eps / 4) / 4.0;
      EXPECT_NEAR(g[size_t(i * 4 + k)], want, 1e-12) << i << "," << k;
    }
  }
}

TEST(Loss, CrossEntropySpatialTargets) {
  // logits [N, C, H, W], target [N, H, W]
  Tensor target = Tensor::randint(0, 3, {2, 2, 3});
  for (std::string red : {"mean", "none"}) {
    auto f = [&](const std::vector<Tensor>& x) {
      return ops::cross_entropy(x[0], target, red, -100, 0.1);
    };
    std::vector<Tensor> in = {random_input({2, 3, 2, 3}, DType::f64, true)};
    EXPECT_TRUE(forward_matches_f64(f, in));
    in[0].requires_grad_();
    EXPECT_TRUE(gradcheck(f, in));
  }
  // Same as moving classes last and flattening.
  Tensor x = Tensor::randn({2, 3, 2, 3}, DType::f64);
  Tensor flat = x.permute({0, 2, 3, 1}).reshape({-1, 3});
  EXPECT_TRUE(all_close(ops::cross_entropy(x, target, "none"),
                        ops::cross_entropy(flat, target.reshape({-1}), "none").reshape({2, 2, 3}),
                        1e-12, 1e-12));
  EXPECT_EQ(ops::cross_entropy(x, target, "none").shape(), (Shape{2, 2, 3}));
}

TEST(Loss, CrossEntropyProbabilityTargets) {
  Tensor probs = ops::softmax(Tensor::randn({4, 5}, DType::f64), 1);
  for (std::string red : {"mean", "sum", "none"})
    for (double eps : {0.0, 0.2}) {
      SCOPED_TRACE(red + " " + std::to_string(eps));
      auto f = [&](const std::vector<Tensor>& x) {
        return ops::cross_entropy(x[0], x[1], red, -100, eps);
      };
      std::vector<Tensor> in = {random_input({4, 5}, DType::f64, true), probs};
      EXPECT_TRUE(forward_matches_f64(f, in));
      in[0].requires_grad_();
      in[1].requires_grad_();
      EXPECT_TRUE(gradcheck(f, in));
    }
  // Hand formula: mean over samples of -sum_c ((1 - eps) p + eps / C) logp.
  Tensor x = Tensor::randn({4, 5}, DType::f64);
  auto xv = x.to_double_vector(), pv = probs.to_double_vector();
  const double eps = 0.2;
  double total = 0;
  for (int64_t i = 0; i < 4; ++i) {
    auto lp = ref_log_softmax(xv, i, 5);
    for (int64_t k = 0; k < 5; ++k)
      total -= ((1 - eps) * pv[size_t(i * 5 + k)] + eps / 5) * lp[size_t(k)];
  }
  EXPECT_NEAR(ops::cross_entropy(x, probs, "mean", -100, eps).item(), total / 4, 1e-12);
  // One-hot probabilities give the same loss as class indices.
  Tensor t = Tensor::from_vector(std::vector<int64_t>{0, 3, 1, 4}, {4});
  Tensor onehot = ops::eq(Tensor::arange(5).reshape({1, 5}), t.reshape({4, 1})).to(DType::f64);
  EXPECT_NEAR(ops::cross_entropy(x, onehot, "mean", -100, 0.1).item(),
              ops::cross_entropy(x, t, "mean", -100, 0.1).item(), 1e-12);
}

TEST(Loss, CrossEntropyUnbatchedAndEdgeCases) {
  Tensor x = Tensor::from_vector(std::vector<double>{1, 2, 3}, {3});
  Tensor t = Tensor::scalar(2, DType::i64);
  double want = ref_cross_entropy({1, 2, 3}, {2}, 3, "sum", -100, 0);
  EXPECT_NEAR(ops::cross_entropy(x, t).item(), want, 1e-12);
  EXPECT_EQ(ops::cross_entropy(x, t, "none").dim(), 0);
  // All targets ignored: mean is NaN (0 / 0), sum is 0.
  Tensor all_ignored = Tensor::full({2}, -100, DType::i64);
  Tensor l2 = Tensor::zeros({2, 3}, DType::f64);
  EXPECT_TRUE(std::isnan(ops::cross_entropy(l2, all_ignored).item()));
  EXPECT_EQ(ops::cross_entropy(l2, all_ignored, "sum").item(), 0.0);
  // int32 targets work the same.
  Tensor ti = Tensor::from_vector(std::vector<int64_t>{0, 2}, {2});
  EXPECT_EQ(ops::cross_entropy(l2, ti.to(DType::i32)).item(), ops::cross_entropy(l2, ti).item());
  EXPECT_NEAR(ops::cross_entropy(l2, ti).item(), std::log(3.0), 1e-15);
}

TEST(Loss, CrossEntropyLargeLogitsKeepPrecision) {
  // Logits near 1000: float32 must not round the loss or gradient at the scale of the logits.
  std::vector<double> row = {1000.0, 1001.5, 999.0, 1002.0};
  Tensor x = Tensor::from_vector(row, {1, 4}, DType::f32).requires_grad_();
  Tensor t = Tensor::from_vector(std::vector<int64_t>{1}, {1});
  double want = ref_cross_entropy(row, {1}, 4, "mean", -100, 0.1);
  Tensor loss = ops::cross_entropy(x, t, "mean", -100, 0.1);
  EXPECT_NEAR(loss.item(), want, 2e-6);
  loss.backward();
  auto lp = ref_log_softmax(row, 0, 4);
  auto g = x.grad().to_double_vector();
  for (int64_t k = 0; k < 4; ++k)
    EXPECT_NEAR(g[size_t(k)], std::exp(lp[size_t(k)]) - (k == 1 ? 0.9 : 0.0) - 0.025, 1e-6);
}

TEST(Loss, CrossEntropyLargeFloat32) {
  // Big enough for the parallel kernel paths; checked against float64.
  Tensor x = Tensor::randn({2048, 100});
  Tensor t = Tensor::randint(0, 100, {2048});
  auto f = [&](const std::vector<Tensor>& in) {
    return ops::cross_entropy(in[0], t, "mean", 7, 0.1);
  };
  EXPECT_TRUE(forward_matches_f64(f, {x.to(DType::f64)}, 1e-5, 1e-6));
  EXPECT_TRUE(backward_matches_f64(f, {x.to(DType::f64).requires_grad_()}, 1e-4, 1e-8));
}

TEST(Loss, CrossEntropyErrors) {
  Tensor x = Tensor::zeros({2, 10});
  EXPECT_TRUE(throws_with(
      [&] {
        ops::cross_entropy(x, Tensor::from_vector(std::vector<int64_t>{3, 12}, {2}));
      },
      "[cross_entropy] target 12 (sample 1) is out of range for 10 classes"));
  EXPECT_TRUE(throws_with(
      [&] {
        ops::cross_entropy(x, Tensor::from_vector(std::vector<int64_t>{-1, 0}, {2}));
      },
      "[cross_entropy] target -1 (sample 0) is out of range for 10 classes"));
  EXPECT_TRUE(throws_with([&] { ops::cross_entropy(x, Tensor::zeros({3}, DType::i64)); },
                          "[cross_entropy] target of shape [3] does not match logits [2, 10]"));
  EXPECT_TRUE(throws_with(
      [&] {
        ops::cross_entropy(x, Tensor::zeros({2, 9}));
      },
      "[cross_entropy] probability target of shape [2, 9] must match logits "
      "[2, 10]"));
  EXPECT_TRUE(throws_with([&] { ops::cross_entropy(x, Tensor::zeros({2}, DType::i64), "avg"); },
                          "[cross_entropy] reduction must be 'mean', 'sum' or 'none', got 'avg'"));
  EXPECT_TRUE(throws_with([&] { ops::cross_entropy(x, Tensor::zeros({2}, DType::b8)); },
                          "[cross_entropy] class-index target must be int64 or int32"));
  EXPECT_TRUE(
      throws_with([&] { ops::cross_entropy(x, Tensor::zeros({2}, DType::i64), "mean", -100, 1.5); },
                  "[cross_entropy] label_smoothing must be in [0, 1]"));
}

TEST(Loss, MseLoss) {
  for (std::string red : {"mean", "sum", "none"})
    for (auto& [sa, sb] : std::vector<std::pair<Shape, Shape>>{{{3, 4}, {3, 4}}, {{2, 3}, {3}}}) {
      SCOPED_TRACE(red);
      auto f = [&](const std::vector<Tensor>& x) { return ops::mse_loss(x[0], x[1], red); };
      std::vector<Tensor> in = {random_input(sa, DType::f64, true), random_input(sb)};
      EXPECT_TRUE(forward_matches_f64(f, in));
      in[0].requires_grad_();
      in[1].requires_grad_();
      EXPECT_TRUE(gradcheck(f, in));
    }
  Tensor a = Tensor::from_vector(std::vector<double>{1, 2, 3}, {3});
  Tensor b = Tensor::from_vector(std::vector<double>{1, 0, 6}, {3});
  EXPECT_EQ(ops::mse_loss(a, b).item(), 13.0 / 3.0);
  EXPECT_EQ(ops::mse_loss(a, b, "sum").item(), 13.0);
  EXPECT_EQ(ops::mse_loss(a, b, "none").to_double_vector(), (std::vector<double>{0, 4, 9}));
  EXPECT_TRUE(throws_with([&] { ops::mse_loss(a, Tensor::zeros({2})); },
                          "[mse_loss] input of shape [3] and target of shape [2] cannot be "
                          "broadcast together"));
  EXPECT_TRUE(throws_with([&] { ops::mse_loss(a, b, "max"); }, "[mse_loss] reduction must be"));
}

TEST(Loss, CrossEntropySecondDerivatives) {
  Tensor logits = random_input({4, 3}, DType::f64, false, -2, 2).requires_grad_();
  Tensor target = Tensor::from_vector(std::vector<int64_t>{2, -100, 0, 1}, {4});
  for (const char* reduction : {"mean", "none"}) {
    SCOPED_TRACE(reduction);
    std::string r = reduction;
    EXPECT_TRUE(gradgradcheck(
        [target, r](auto& in) { return ops::cross_entropy(in[0], target, r, -100, 0.1); },
        {logits}));
  }
}
