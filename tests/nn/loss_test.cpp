// Losses against formulas computed in the test.
#include <cmath>

#include "support/op_check.h"

using namespace zenith;
using namespace zenith::testing;

namespace {

// -log softmax(logits)[label] per row, with PyTorch's label smoothing.
std::vector<double> ce_rows(const std::vector<double>& z, int64_t n, int64_t c,
                            const std::vector<int64_t>& labels, double smoothing) {
  std::vector<double> out;
  for (int64_t i = 0; i < n; ++i) {
    double mx = -1e300, s = 0;
    for (int64_t j = 0; j < c; ++j) mx = std::max(mx, z[size_t(i * c + j)]);
    for (int64_t j = 0; j < c; ++j) s += std::exp(z[size_t(i * c + j)] - mx);
    double lse = mx + std::log(s), loss = 0;
    for (int64_t j = 0; j < c; ++j) {
      double q = (j == labels[size_t(i)] ? 1.0 - smoothing : 0.0) + smoothing / double(c);
      loss -= q * (z[size_t(i * c + j)] - lse);
    }
    out.push_back(loss);
  }
  return out;
}

}  // namespace

TEST(Loss, SparseSoftmaxCrossEntropy) {
  manual_seed(20);
  Tensor logits = Tensor::uniform({4, 5}, -3, 3, DType::f64);
  std::vector<int64_t> labels{0, 4, 2, 2};
  auto rows = ce_rows(logits.to_double_vector(), 4, 5, labels, 0.0);
  Tensor lab = Tensor::from_vector(labels, {4});
  auto none = nn::SoftmaxCrossEntropyWithLogits(true, "none")->forward(logits, lab);
  EXPECT_TRUE(all_close(none, Tensor::from_vector(rows, {4}), 1e-10, 1e-12));
  double mean = (rows[0] + rows[1] + rows[2] + rows[3]) / 4;
  EXPECT_NEAR(nn::SoftmaxCrossEntropyWithLogits(true)->forward(logits, lab).item(), mean, 1e-10);
  EXPECT_NEAR(nn::SoftmaxCrossEntropyWithLogits(true, "sum")->forward(logits, lab).item(), mean * 4,
              1e-10);
  // int32 labels (as datasets produce) are accepted.
  EXPECT_NEAR(nn::SoftmaxCrossEntropyWithLogits(true)->forward(logits, lab.to(DType::i32)).item(),
              mean, 1e-10);
}

TEST(Loss, LabelSmoothingAndDenseLabels) {
  manual_seed(21);
  Tensor logits = Tensor::uniform({3, 4}, -2, 2, DType::f64);
  std::vector<int64_t> labels{1, 3, 0};
  auto rows = ce_rows(logits.to_double_vector(), 3, 4, labels, 0.1);
  double mean = (rows[0] + rows[1] + rows[2]) / 3;
  auto loss = nn::SoftmaxCrossEntropyWithLogits(true, "mean", 0.1);
  EXPECT_NEAR(loss->forward(logits, Tensor::from_vector(labels, {3})).item(), mean, 1e-10);
  // The same smoothed distribution given densely.
  std::vector<double> dense(12, 0.1 / 4);
  for (int i = 0; i < 3; ++i) dense[size_t(i * 4 + labels[size_t(i)])] += 0.9;
  auto dloss = nn::SoftmaxCrossEntropyWithLogits(false);
  EXPECT_NEAR(dloss->forward(logits, Tensor::from_vector(dense, {3, 4})).item(), mean, 1e-10);
}

TEST(Loss, GradientOfMeanCrossEntropy) {
  manual_seed(22);
  Tensor logits = Tensor::uniform({3, 4}, -2, 2, DType::f64);
  Tensor labels = Tensor::from_vector(std::vector<int64_t>{1, 3, 0}, {3});
  logits.requires_grad_();
  auto loss = nn::SoftmaxCrossEntropyWithLogits(true);
  EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& in) { return loss->forward(in[0], labels); },
                        {logits}));
}

TEST(Loss, MSE) {
  Tensor a = Tensor::from_vector(std::vector<double>{1, 2, 3}, {3});
  Tensor b = Tensor::from_vector(std::vector<double>{0, 4, 3}, {3});
  EXPECT_NEAR(nn::MSELoss()->forward(a, b).item(), 5.0 / 3, 1e-12);
  EXPECT_NEAR(nn::MSELoss("sum")->forward(a, b).item(), 5.0, 1e-12);
  EXPECT_EQ(nn::MSELoss("none")->forward(a, b).to_double_vector(), (std::vector<double>{1, 4, 0}));
}

TEST(Loss, Errors) {
  Tensor logits = Tensor::zeros({2, 3});
  EXPECT_TRUE(throws_with(
      [&] {
        nn::SoftmaxCrossEntropyWithLogits(true)->forward(logits, Tensor::zeros({2, 3}));
      },
      "sparse=true expects integer class indices"));
  EXPECT_TRUE(throws_with(
      [&] { nn::SoftmaxCrossEntropyWithLogits(false)->forward(logits, Tensor::arange(2)); },
      "sparse=false expects float labels"));
  EXPECT_TRUE(throws_with([] { nn::MSELoss("avg"); }, "[MSELoss] reduction must be"));
}
