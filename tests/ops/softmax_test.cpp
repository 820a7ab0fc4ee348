#include <cmath>

#include "support/op_check.h"

using namespace zenith;
using namespace zenith::testing;

namespace {

struct SoftmaxCase {
  Shape shape;
  int64_t dim;
  bool noncontiguous;
};

const std::vector<SoftmaxCase> kCases = {
    {{3, 5}, 1, false},   {{3, 5}, 0, true}, {{2, 3, 4}, 1, true}, {{2, 3, 4}, -1, false},
    {{2, 3, 4}, 0, true}, {{7}, 0, false},   {{}, 0, false},       {{4, 1, 3}, 1, false}};

void check(bool log) {
  for (auto& c : kCases) {
    SCOPED_TRACE(shape_str(c.shape) + " dim " + std::to_string(c.dim));
    auto f = [&c, log](const std::vector<Tensor>& x) {
      return log ? ops::log_softmax(x[0], c.dim) : ops::softmax(x[0], c.dim);
    };
    std::vector<Tensor> in = {random_input(c.shape, DType::f64, c.noncontiguous, -4, 4)};
    EXPECT_TRUE(forward_matches_f64(f, in));
    in[0].requires_grad_();
    EXPECT_TRUE(gradcheck(f, in));
    EXPECT_TRUE(backward_matches_f64(f, in));
  }
}

// Reference softmax of one row in float64.
std::vector<double> ref_softmax(const std::vector<double>& x) {
  double m = *std::max_element(x.begin(), x.end()), s = 0;
  for (double v : x) s += std::exp(v - m);
  std::vector<double> out;
  for (double v : x) out.push_back(std::exp(v - m) / s);
  return out;
}

}  // namespace

TEST(Softmax, Softmax) { check(false); }
TEST(Softmax, LogSoftmax) { check(true); }

TEST(Softmax, MatchesHandFormulaAndSumsToOne) {
  std::vector<double> row = {0.5, -1.0, 2.0, 0.0};
  Tensor x = Tensor::from_vector(row, {1, 4});
  auto ref = ref_softmax(row);
  auto got = ops::softmax(x, 1).to_double_vector();
  auto lgot = ops::log_softmax(x, 1).to_double_vector();
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_NEAR(got[i], ref[i], 1e-15);
    EXPECT_NEAR(lgot[i], std::log(ref[i]), 1e-14);
  }
  // Large rows (parallel, vectorised) in float32 sum to one.
  Tensor big = Tensor::randn({512, 1000});
  Tensor s = ops::sum(ops::softmax(big, 1), {1});
  EXPECT_TRUE(all_close(s, Tensor::ones({512}), 1e-5, 1e-5));
  Tensor cols = ops::sum(ops::softmax(big, 0), {0});
  EXPECT_TRUE(all_close(cols, Tensor::ones({1000}), 1e-5, 1e-5));
}

TEST(Softmax, NumericallyStable) {
  Tensor x = Tensor::from_vector(std::vector<float>{1000, 1001, 1002, -1000, -1e30f, 0}, {2, 3});
  auto y = ops::softmax(x, 1).to_float_vector();
  auto ly = ops::log_softmax(x, 1).to_float_vector();
  auto r = ref_softmax({0, 1, 2});
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_NEAR(y[i], r[i], 1e-6);
    EXPECT_NEAR(ly[i], std::log(r[i]), 1e-5);
  }
  EXPECT_EQ(y[4], 0.0f);
  EXPECT_NEAR(y[5], 1.0f, 1e-6);
  EXPECT_NEAR(ly[3], -1000.0f, 1e-3);
  for (float v : y) EXPECT_FALSE(std::isnan(v));
  // -inf logits get probability 0 (masked attention).
  Tensor m = Tensor::from_vector(std::vector<float>{0, -INFINITY, 0}, {3});
  EXPECT_EQ(ops::softmax(m, 0).to_float_vector(), (std::vector<float>{0.5f, 0.0f, 0.5f}));
}

TEST(Softmax, HalfPrecisionAndIntegers) {
  Tensor x = Tensor::randn({4, 6});
  for (DType dt : {DType::f16, DType::bf16}) {
    Tensor y = ops::softmax(x.to(dt), 1);
    EXPECT_EQ(y.dtype(), dt);
    EXPECT_TRUE(all_close(y.to(DType::f32), ops::softmax(x, 1), 1e-2, 1e-3));
  }
  EXPECT_EQ(ops::softmax(Tensor::arange(3), 0).dtype(), DType::f32);
}

TEST(Softmax, Errors) {
  Tensor x = Tensor::zeros({2, 3});
  EXPECT_TRUE(
      throws_with([&] { ops::softmax(x, 2); }, "[softmax] dim 2 out of range for shape [2, 3]"));
  EXPECT_TRUE(throws_with([&] { ops::log_softmax(x, -3); },
                          "[log_softmax] dim -3 out of range for shape [2, 3]"));
}

TEST(Softmax, SecondDerivatives) {
  Tensor x = random_input({2, 4}, DType::f64, false, -2, 2).requires_grad_();
  EXPECT_TRUE(gradgradcheck([](auto& in) { return ops::softmax(in[0], 1); }, {x}));
  EXPECT_TRUE(gradgradcheck([](auto& in) { return ops::log_softmax(in[0], 0); }, {x}));
}
