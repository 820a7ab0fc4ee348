// Layers: forward shapes and values, train/eval behaviour, and gradients of whole Sequentials
// (inputs and every parameter) against central finite differences in float64.
#include <cmath>

#include "support/op_check.h"

using namespace zenith;
using namespace zenith::testing;

namespace {

// Gradients of sum(net(x) * w) with respect to x and every parameter, against central
// differences with each parameter element perturbed in place.
void check_cell_gradients(const nn::CellPtr& net, const Tensor& x_in, double rtol = 1e-5,
                          double atol = 1e-7) {
  Tensor x = x_in.detach().clone();
  if (is_floating(x.dtype())) x.requires_grad_();
  Tensor w;
  {
    NoGradGuard g;
    w = Tensor::uniform(net->forward(x).shape(), 0.5, 1.5, DType::f64);
  }
  for (auto& p : net->trainable_params()) p.zero_grad();
  ops::sum(ops::mul(net->forward(x), w)).backward();
  auto eval = [&] {
    NoGradGuard g;
    return ops::sum(ops::mul(net->forward(x), w)).item();
  };
  std::vector<std::pair<std::string, Tensor>> targets = net->named_parameters();
  if (x.requires_grad()) targets.insert(targets.begin(), {"input", x});
  const double eps = 1e-6;
  for (auto& [name, t] : targets) {
    ASSERT_EQ(t.dtype(), DType::f64) << name;
    ASSERT_TRUE(t.grad().defined()) << name << " got no gradient";
    double* p = t.data<double>();
    std::vector<double> numeric(size_t(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i) {
      double orig = p[i];
      p[i] = orig + eps;
      double plus = eval();
      p[i] = orig - eps;
      double minus = eval();
      p[i] = orig;
      numeric[size_t(i)] = (plus - minus) / (2 * eps);
    }
    EXPECT_TRUE(all_close(t.grad(), Tensor::from_vector(numeric, t.shape()), rtol, atol)) << name;
  }
}

}  // namespace

TEST(Layers, ConvNetGradcheckFloat64) {
  manual_seed(3);
  auto net = nn::SequentialCell({nn::Conv2d(2, 3, 3, 1, "pad", 1, 1, 1, true), nn::Tanh(),
                                 nn::AvgPool2d(2), nn::Conv2d(3, 4, 3, 1, "same"), nn::SiLU(),
                                 nn::AdaptiveAvgPool2d(2), nn::Flatten(), nn::Dense(16, 5),
                                 nn::Sigmoid()});
  net->to(DType::f64);
  check_cell_gradients(net, Tensor::uniform({2, 2, 6, 6}, -1, 1, DType::f64));
}

TEST(Layers, BatchNormTrainingGradcheckFloat64) {
  manual_seed(4);
  // Training-mode batch norm normalises with batch statistics only, so every perturbed run
  // computes the same function although the running statistics move.
  auto net = nn::SequentialCell({nn::Conv2d(2, 3, 3, 1, "valid"), nn::BatchNorm2d(3), nn::ReLU(),
                                 nn::MaxPool2d(2), nn::Flatten(), nn::Dense(12, 2)});
  net->to(DType::f64);
  check_cell_gradients(net, Tensor::uniform({3, 2, 6, 6}, -1, 1, DType::f64), 1e-4, 1e-6);
}

TEST(Layers, DenseNormsGradcheckFloat64) {
  manual_seed(5);
  auto net = nn::SequentialCell({nn::Dense(6, 8), nn::LayerNorm({8}), nn::GELU(), nn::Dense(8, 4),
                                 nn::RMSNorm(4), nn::Tanh()});
  net->to(DType::f64);
  check_cell_gradients(net, Tensor::uniform({3, 6}, -1, 1, DType::f64));
}

TEST(Layers, EmbeddingGradcheckFloat64) {
  manual_seed(6);
  auto net = nn::SequentialCell({nn::Embedding(7, 3), nn::Dense(3, 2)});
  net->to(DType::f64);
  check_cell_gradients(net, Tensor::from_vector(std::vector<int64_t>{0, 3, 3, 6}, {2, 2}));
}

TEST(Layers, ShapesOfTheSeedNetwork) {
  auto net = nn::SequentialCell({nn::Conv2d(3, 32, 3, 1, "valid"), nn::ReLU(), nn::MaxPool2d(2),
                                 nn::Conv2d(32, 64, 3, 1, "valid"), nn::ReLU(), nn::MaxPool2d(2),
                                 nn::Flatten(), nn::Dense(64 * 6 * 6, 10)});
  NoGradGuard g;
  EXPECT_EQ(net->forward(Tensor::zeros({2, 3, 32, 32})).shape(), (Shape{2, 10}));
  // MindSpore's default pad_mode is "same".
  EXPECT_EQ(nn::Conv2d(3, 8, 3)->forward(Tensor::zeros({1, 3, 9, 9})).shape(), (Shape{1, 8, 9, 9}));
  EXPECT_EQ(nn::Conv2d(3, 8, 3, 2, "pad", 1)->forward(Tensor::zeros({1, 3, 8, 8})).shape(),
            (Shape{1, 8, 4, 4}));
}

TEST(Layers, DenseComputesXWtPlusB) {
  auto dense = nn::Dense(2, 2);
  nn::StateDict sd;
  sd["weight"] = Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  sd["bias"] = Tensor::from_vector(std::vector<float>{10, 20}, {2});
  dense->load_state_dict(sd);
  Tensor y = dense->forward(Tensor::from_vector(std::vector<float>{1, 1}, {1, 2}));
  EXPECT_EQ(y.to_double_vector(), (std::vector<double>{13, 27}));
  EXPECT_TRUE(throws_with(
      [&] {
        dense->forward(Tensor::zeros({1, 3}));
      },
      "[Dense] expected input [..., 2], got [1, 3]"));
}

TEST(Layers, DropoutTrainAndEval) {
  manual_seed(7);
  auto drop = nn::Dropout(0.25);
  Tensor x = Tensor::ones({100000});
  auto v = drop->forward(x).to_double_vector();
  int64_t zeros = 0;
  for (double e : v) {
    if (e == 0.0)
      ++zeros;
    else
      EXPECT_NEAR(e, 1.0 / 0.75, 1e-6);
  }
  EXPECT_NEAR(double(zeros) / double(v.size()), 0.25, 0.01);
  drop->set_train(false);
  EXPECT_TRUE(all_close(drop->forward(x), x, 0, 0));
  EXPECT_TRUE(throws_with([] { nn::Dropout(1.0); }, "[Dropout] p must be in [0, 1)"));
}

TEST(Layers, BatchNormTrainUpdatesRunningStatsEvalUsesThem) {
  auto bn = nn::BatchNorm2d(2);  // MindSpore momentum 0.9 = PyTorch 0.1
  Tensor x = Tensor::uniform({4, 2, 3, 3}, 0, 4);
  auto xs = x.to_double_vector();
  // Per-channel batch mean and unbiased variance.
  std::vector<double> mean(2, 0.0), var(2, 0.0);
  for (int c = 0; c < 2; ++c) {
    std::vector<double> vals;
    for (int n = 0; n < 4; ++n)
      for (int i = 0; i < 9; ++i) vals.push_back(xs[size_t((n * 2 + c) * 9 + i)]);
    for (double e : vals) mean[size_t(c)] += e / double(vals.size());
    for (double e : vals) var[size_t(c)] += (e - mean[size_t(c)]) * (e - mean[size_t(c)]);
    var[size_t(c)] /= double(vals.size() - 1);
  }
  Tensor y = bn->forward(x);
  auto ys = y.to_double_vector();
  double m0 = 0;
  for (int n = 0; n < 4; ++n)
    for (int i = 0; i < 9; ++i) m0 += ys[size_t(n * 18 + i)] / 36.0;
  EXPECT_NEAR(m0, 0.0, 1e-5);  // normalised with batch statistics
  auto sd = bn->state_dict();
  auto rm = sd.at("running_mean").to_double_vector();
  auto rv = sd.at("running_var").to_double_vector();
  for (int c = 0; c < 2; ++c) {
    EXPECT_NEAR(rm[size_t(c)], 0.1 * mean[size_t(c)], 1e-5);
    EXPECT_NEAR(rv[size_t(c)], 0.9 + 0.1 * var[size_t(c)], 1e-5);
  }
  EXPECT_EQ(sd.at("num_batches_tracked").item(), 1.0);
  bn->eval();
  Tensor ye = bn->forward(x);
  auto yev = ye.to_double_vector();
  EXPECT_NEAR(yev[0], (xs[0] - rm[0]) / std::sqrt(rv[0] + 1e-5), 1e-4);
  EXPECT_EQ(bn->state_dict().at("num_batches_tracked").item(), 1.0);  // eval leaves stats alone
  EXPECT_TRUE(throws_with(
      [&] {
        bn->forward(Tensor::zeros({1, 3, 2, 2}));
      },
      "[BatchNorm2d] expected input [N, 2, H, W], got [1, 3, 2, 2]"));
}

TEST(Layers, ActivationValues) {
  Tensor x = Tensor::from_vector(std::vector<double>{-2, 0, 3}, {3});
  EXPECT_TRUE(
      all_close(nn::ReLU()->forward(x), Tensor::from_vector(std::vector<double>{0, 0, 3}, {3})));
  EXPECT_TRUE(all_close(
      nn::Sigmoid()->forward(x),
      Tensor::from_vector(
          std::vector<double>{1 / (1 + std::exp(2.0)), 0.5, 1 / (1 + std::exp(-3.0))}, {3})));
  EXPECT_TRUE(
      all_close(nn::Tanh()->forward(x),
                Tensor::from_vector(std::vector<double>{std::tanh(-2.0), 0, std::tanh(3.0)}, {3})));
  EXPECT_TRUE(all_close(
      nn::SiLU()->forward(x),
      Tensor::from_vector(
          std::vector<double>{-2 / (1 + std::exp(2.0)), 0, 3 / (1 + std::exp(-3.0))}, {3})));
  double g3 = 0.5 * 3 * (1 + std::erf(3 / std::sqrt(2.0)));
  EXPECT_NEAR(nn::GELU()->forward(x).to_double_vector()[2], g3, 1e-9);
  EXPECT_EQ(nn::Flatten()->forward(Tensor::zeros({2, 3, 4})).shape(), (Shape{2, 12}));
}
