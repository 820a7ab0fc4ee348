#include "support/op_check.h"

using namespace zenith;
using namespace zenith::testing;

namespace {

struct BinaryCase {
  Shape a, b;
  bool noncontiguous;
};

const std::vector<BinaryCase> kCases = {{{3, 4}, {3, 4}, false},
                                        {{3, 4}, {4}, false},
                                        {{2, 1, 5}, {3, 1}, true},
                                        {{5}, {}, false},
                                        {{2, 3, 4}, {2, 3, 4}, true}};

void check_binary(const OpFn& f, double low = -1, double high = 1) {
  for (auto& c : kCases) {
    SCOPED_TRACE(shape_str(c.a) + " op " + shape_str(c.b));
    std::vector<Tensor> in = {random_input(c.a, DType::f64, c.noncontiguous, low, high),
                              random_input(c.b, DType::f64, false, low, high)};
    EXPECT_TRUE(forward_matches_f64(f, in));
    in[0].requires_grad_();
    in[1].requires_grad_();
    EXPECT_TRUE(gradcheck(f, in));
  }
}

}  // namespace

TEST(Binary, Add) {
  check_binary([](auto& x) { return ops::add(x[0], x[1]); });
}
TEST(Binary, Sub) {
  check_binary([](auto& x) { return ops::sub(x[0], x[1]); });
}
TEST(Binary, Mul) {
  check_binary([](auto& x) { return ops::mul(x[0], x[1]); });
}
// mul saves each factor only for the other's gradient: x * a frozen factor (a LoRA delta times
// its scaling) keeps no copy of x.
TEST(Binary, MulSavesAFactorOnlyForTheOthersGradient) {
  for (bool train_factor : {false, true}) {
    SCOPED_TRACE(train_factor);
    Tensor leaf = Tensor::randn({4, 3}).requires_grad_();
    Tensor c = Tensor::randn({3}).requires_grad_(train_factor);
    Tensor x = ops::add(leaf, 1.0);
    Tensor y = ops::mul(x, c);
    EXPECT_EQ(kept_for_backward(x), train_factor);
    Tensor dy = Tensor::randn({4, 3});
    y.backward(dy);
    EXPECT_TRUE(all_close(leaf.grad(), ops::mul(dy, c.detach())));
    if (train_factor) {
      EXPECT_TRUE(all_close(c.grad(), ops::sum(ops::mul(dy, ops::add(leaf.detach(), 1.0)), {0}),
                            1e-5, 1e-5));
    }
  }
}

TEST(Binary, Div) {
  check_binary([](auto& x) { return ops::div(x[0], x[1]); }, 0.5, 2.0);
}

TEST(Binary, ScalarKeepsDtype) {
  Tensor a = Tensor::ones({3}, DType::f32);
  EXPECT_EQ(ops::mul(a, 2.5).dtype(), DType::f32);
  EXPECT_EQ((a * 2.5).to_float_vector(), (std::vector<float>{2.5f, 2.5f, 2.5f}));
  Tensor i = Tensor::arange(3);
  EXPECT_EQ(ops::add(i, 1.0).dtype(), DType::i64);
  EXPECT_EQ(ops::add(i, 0.5).dtype(), DType::f32);
}

TEST(Binary, ShapeMismatchNamesOpAndShapes) {
  Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({4});
  EXPECT_TRUE(throws_with([&] { ops::add(a, b); }, "[add] shapes [2, 3] and [4]"));
}

TEST(Binary, Pow) {
  check_binary([](auto& x) { return ops::pow(x[0], x[1]); }, 0.5, 2.0);
}
TEST(Binary, Maximum) {
  check_binary([](auto& x) { return ops::maximum(x[0], x[1]); });
}
TEST(Binary, Minimum) {
  check_binary([](auto& x) { return ops::minimum(x[0], x[1]); });
}

TEST(Binary, PowScalar) {
  for (double e : {2.0, 3.0, 0.5, -1.0, -0.5, 1.7, 1.0}) {
    SCOPED_TRACE(e);
    for (bool nc : {false, true}) {
      std::vector<Tensor> in = {random_input({3, 4}, DType::f64, nc, 0.5, 2.0)};
      auto f = [e](const std::vector<Tensor>& x) { return ops::pow(x[0], e); };
      EXPECT_TRUE(forward_matches_f64(f, in));
      in[0].requires_grad_();
      EXPECT_TRUE(gradcheck(f, in));
    }
  }
  // Zero exponent: ones, zero gradient; negative bases with integer exponents are fine.
  Tensor x = Tensor::from_vector(std::vector<double>{-2.0, 0.0, 3.0}, {3}).requires_grad_();
  Tensor y = ops::pow(x, 0.0);
  EXPECT_EQ(y.to_double_vector(), (std::vector<double>{1, 1, 1}));
  ops::sum(y).backward();
  EXPECT_EQ(x.grad().to_double_vector(), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(ops::pow(x.detach(), 3.0).to_double_vector(), (std::vector<double>{-8, 0, 27}));
}

TEST(Binary, PowValuesAndConventions) {
  // d/db a^b at a = 0, b >= 0 is 0 (not NaN), and d/da at b = 0 is 0 (not 0 * inf).
  Tensor a = Tensor::from_vector(std::vector<double>{0.0, 0.0, 2.0}, {3}).requires_grad_();
  Tensor b = Tensor::from_vector(std::vector<double>{2.0, 0.0, 3.0}, {3}).requires_grad_();
  Tensor y = ops::pow(a, b);
  EXPECT_EQ(y.to_double_vector(), (std::vector<double>{0, 1, 8}));
  ops::sum(y).backward();
  EXPECT_EQ(a.grad().to_double_vector(), (std::vector<double>{0, 0, 12}));
  auto gb = b.grad().to_double_vector();
  EXPECT_EQ(gb[0], 0.0);
  EXPECT_EQ(gb[1], 0.0);
  EXPECT_NEAR(gb[2], 8 * std::log(2.0), 1e-12);
  // Integer powers stay integer; fractional exponents promote.
  Tensor i = Tensor::from_vector(std::vector<int64_t>{-2, 3, 0}, {3});
  EXPECT_EQ(ops::pow(i, 3.0).dtype(), DType::i64);
  EXPECT_EQ(ops::pow(i, 3.0).to_int_vector(), (std::vector<int64_t>{-8, 27, 0}));
  EXPECT_EQ(ops::pow(i, Tensor::from_vector(std::vector<int64_t>{2, 2, 5}, {3})).to_int_vector(),
            (std::vector<int64_t>{4, 9, 0}));
  EXPECT_EQ(ops::pow(i, 0.5).dtype(), DType::f32);
  EXPECT_TRUE(throws_with([&] { ops::pow(i, -1.0); }, "[pow] integer tensors (shape [3])"));
}

TEST(Binary, MaximumMinimumTiesSplitGradient) {
  Tensor a = Tensor::from_vector(std::vector<double>{1.0, 2.0, 3.0}, {3}).requires_grad_();
  Tensor b = Tensor::from_vector(std::vector<double>{2.0, 2.0, 1.0}, {3}).requires_grad_();
  Tensor y = ops::maximum(a, b);
  EXPECT_EQ(y.to_double_vector(), (std::vector<double>{2, 2, 3}));
  ops::sum(y).backward();
  EXPECT_EQ(a.grad().to_double_vector(), (std::vector<double>{0, 0.5, 1}));
  EXPECT_EQ(b.grad().to_double_vector(), (std::vector<double>{1, 0.5, 0}));
  a.zero_grad();
  b.zero_grad();
  Tensor z = ops::minimum(a, b);
  EXPECT_EQ(z.to_double_vector(), (std::vector<double>{1, 2, 1}));
  ops::sum(z).backward();
  EXPECT_EQ(a.grad().to_double_vector(), (std::vector<double>{1, 0.5, 0}));
  EXPECT_EQ(b.grad().to_double_vector(), (std::vector<double>{0, 0.5, 1}));
}

TEST(Binary, MaximumPropagatesNan) {
  Tensor a = Tensor::from_vector(std::vector<float>{NAN, 1.0f, 2.0f}, {3});
  Tensor b = Tensor::from_vector(std::vector<float>{0.0f, NAN, 5.0f}, {3});
  for (const Tensor& y : {ops::maximum(a, b), ops::minimum(a, b)}) {
    auto v = y.to_float_vector();
    EXPECT_TRUE(std::isnan(v[0]));
    EXPECT_TRUE(std::isnan(v[1]));
  }
  EXPECT_EQ(ops::maximum(a, b).to_float_vector()[2], 5.0f);
  EXPECT_EQ(ops::minimum(a, b).to_float_vector()[2], 2.0f);
}

TEST(Binary, NewOpsNameThemselvesInErrors) {
  Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({4});
  EXPECT_TRUE(throws_with([&] { ops::pow(a, b); }, "[pow] shapes [2, 3] and [4]"));
  EXPECT_TRUE(throws_with([&] { ops::maximum(a, b); }, "[maximum] shapes [2, 3] and [4]"));
  EXPECT_TRUE(throws_with([&] { ops::minimum(a, b); }, "[minimum] shapes [2, 3] and [4]"));
}

TEST(Binary, SecondDerivatives) {
  Tensor a = random_input({2, 3}, DType::f64).requires_grad_();
  Tensor b = random_input({3}, DType::f64, false, 0.5, 2).requires_grad_();
  EXPECT_TRUE(gradgradcheck([](auto& x) { return ops::mul(x[0], x[1]); }, {a, b}));
  EXPECT_TRUE(gradgradcheck([](auto& x) { return ops::div(x[0], x[1]); }, {a, b}));
  EXPECT_TRUE(gradgradcheck([](auto& x) { return ops::sub(ops::add(x[0], x[1]), x[1]); }, {a, b}));
  Tensor p = random_input({2, 3}, DType::f64, false, 0.5, 2).requires_grad_();
  EXPECT_TRUE(gradgradcheck([](auto& x) { return ops::pow(x[0], x[1]); }, {p, b}));
  EXPECT_TRUE(gradgradcheck([](auto& x) { return ops::pow(x[0], 2.5); }, {p}));
}
