#include <cmath>
#include <random>

#include "backend/cpu/math_simd.h"
#include "support/op_check.h"

using namespace zenith;
using namespace zenith::testing;

namespace {

struct UnaryCase {
  Shape shape;
  bool noncontiguous;
};

const std::vector<UnaryCase> kCases = {
    {{3, 4}, false}, {{2, 3, 5}, true}, {{}, false}, {{7}, true}, {{2, 1, 3}, false}};

void check_unary(const OpFn& f, double low = -3, double high = 3, double rtol = 1e-4) {
  for (auto& c : kCases) {
    SCOPED_TRACE(shape_str(c.shape) + (c.noncontiguous ? " noncontiguous" : ""));
    std::vector<Tensor> in = {random_input(c.shape, DType::f64, c.noncontiguous, low, high)};
    EXPECT_TRUE(forward_matches_f64(f, in, rtol));
    in[0].requires_grad_();
    EXPECT_TRUE(gradcheck(f, in));
    EXPECT_TRUE(backward_matches_f64(f, in));
  }
}

// Max relative error of a float32 op against a float64 reference function on `n` random inputs
// spread over [low, high]; values whose reference is below `floor` in magnitude are compared
// absolutely against `floor`.
double max_rel_error(const std::function<Tensor(const Tensor&)>& op,
                     const std::function<double(double)>& ref, double low, double high,
                     int64_t n = 200000, double floor = 1e-30) {
  Tensor x = Tensor::uniform({n}, low, high, DType::f32);
  Tensor y = op(x);
  auto xv = x.to_double_vector(), yv = y.to_double_vector();
  double worst = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    double r = ref(xv[i]);
    double err = std::abs(yv[i] - r) / std::max(std::abs(r), floor);
    worst = std::max(worst, err);
  }
  return worst;
}

double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

}  // namespace

TEST(Unary, Exp) {
  check_unary([](auto& x) { return ops::exp(x[0]); });
}
TEST(Unary, Log) {
  check_unary([](auto& x) { return ops::log(x[0]); }, 0.2, 3.0);
}
TEST(Unary, Sqrt) {
  check_unary([](auto& x) { return ops::sqrt(x[0]); }, 0.2, 3.0);
}
TEST(Unary, Rsqrt) {
  check_unary([](auto& x) { return ops::rsqrt(x[0]); }, 0.2, 3.0);
}
TEST(Unary, Abs) {
  check_unary([](auto& x) { return ops::abs(x[0]); });
}
TEST(Unary, Tanh) {
  check_unary([](auto& x) { return ops::tanh(x[0]); });
}
TEST(Unary, Sigmoid) {
  check_unary([](auto& x) { return ops::sigmoid(x[0]); });
}
TEST(Unary, Relu) {
  check_unary([](auto& x) { return ops::relu(x[0]); });
}
TEST(Unary, Gelu) {
  check_unary([](auto& x) { return ops::gelu(x[0]); });
}
TEST(Unary, GeluTanh) {
  check_unary([](auto& x) { return ops::gelu(x[0], true); });
}
TEST(Unary, Silu) {
  check_unary([](auto& x) { return ops::silu(x[0]); });
}
TEST(Unary, Square) {
  check_unary([](auto& x) { return ops::square(x[0]); });
}
TEST(Unary, Neg) {
  check_unary([](auto& x) { return ops::neg(x[0]); });
}

TEST(Unary, Float64ValuesMatchStd) {
  Tensor x = Tensor::from_vector(std::vector<double>{-2.5, -0.3, 0.0, 0.7, 4.0}, {5});
  auto v = x.to_double_vector();
  auto check = [&](const Tensor& y, const std::function<double(double)>& ref) {
    auto yv = y.to_double_vector();
    for (size_t i = 0; i < v.size(); ++i)
      EXPECT_NEAR(yv[i], ref(v[i]), 1e-15 + 1e-14 * std::abs(ref(v[i])));
  };
  check(ops::exp(x), [](double a) { return std::exp(a); });
  check(ops::tanh(x), [](double a) { return std::tanh(a); });
  check(ops::sigmoid(x), [](double a) { return 1 / (1 + std::exp(-a)); });
  check(ops::gelu(x), [](double a) { return a * normal_cdf(a); });
  check(ops::gelu(x, true), [](double a) {
    return 0.5 * a * (1 + std::tanh(std::sqrt(2 / M_PI) * (a + 0.044715 * a * a * a)));
  });
  check(ops::silu(x), [](double a) { return a / (1 + std::exp(-a)); });
  check(ops::relu(x), [](double a) { return a > 0 ? a : 0.0; });
  check(ops::abs(x), [](double a) { return std::abs(a); });
  check(ops::square(x), [](double a) { return a * a; });
}

// The fast float32 kernels start next to their std:: references.
TEST(Unary, FastFloat32MathMatchesStd) {
  EXPECT_LT(max_rel_error([](auto& x) { return ops::exp(x); }, [](double a) { return std::exp(a); },
                          -87, 88.5, 400000),
            1e-6);
  EXPECT_LT(max_rel_error([](auto& x) { return ops::tanh(x); },
                          [](double a) { return std::tanh(a); }, -12, 12),
            1e-6);
  EXPECT_LT(max_rel_error([](auto& x) { return ops::log(x); }, [](double a) { return std::log(a); },
                          1e-6, 1e6),
            1e-6);
  EXPECT_LT(max_rel_error([](auto& x) { return ops::log(x); }, [](double a) { return std::log(a); },
                          0.5, 2.0),
            1e-6);
  EXPECT_LT(max_rel_error([](auto& x) { return ops::tanh(x); },
                          [](double a) { return std::tanh(a); }, -1e-3, 1e-3),
            1e-6);
  EXPECT_LT(max_rel_error([](auto& x) { return ops::sigmoid(x); },
                          [](double a) { return 1 / (1 + std::exp(-a)); }, -80, 40),
            1e-6);
  EXPECT_LT(max_rel_error([](auto& x) { return ops::silu(x); },
                          [](double a) { return a / (1 + std::exp(-a)); }, -80, 40),
            1e-6);
  // gelu's left tail: x Phi(x) down to ~1e-30 keeps its relative accuracy.
  EXPECT_LT(max_rel_error([](auto& x) { return ops::gelu(x); },
                          [](double a) { return a * normal_cdf(a); }, -11, 8),
            1e-6);
  // The tanh form's cubic argument is rounded in float32 before exp; in the left tail (values
  // below ~1e-4) that alone costs a few 1e-6 of relative accuracy, as in any float32 evaluation.
  EXPECT_LT(
      max_rel_error([](auto& x) { return ops::gelu(x, true); },
                    [](double a) {
                      return 0.5 * a *
                             (1 + std::tanh(std::sqrt(2 / M_PI) * (a + 0.044715 * a * a * a)));
                    },
                    -8, 8, 200000, 1e-7),
      4e-6);
}

TEST(Unary, FastExpEdgeCases) {
  namespace s = cpu::simd;
  EXPECT_EQ(s::exp(0.0f), 1.0f);
  EXPECT_TRUE(std::isinf(s::exp(89.0f)));
  EXPECT_EQ(s::exp(-100.0f), 0.0f);
  EXPECT_TRUE(std::isnan(s::exp(NAN)));
  EXPECT_NEAR(s::exp(88.7f) / std::exp(double(88.7f)), 1.0, 1e-6);  // n = 128 stays finite
  EXPECT_NEAR(s::exp(-87.3f) / std::exp(double(-87.3f)), 1.0, 1e-6);
  EXPECT_EQ(s::tanh(30.0f), 1.0f);
  EXPECT_EQ(s::tanh(-30.0f), -1.0f);
  EXPECT_TRUE(std::isnan(s::tanh(NAN)));
  EXPECT_EQ(s::log(1.0f), 0.0f);
  EXPECT_TRUE(std::isinf(s::log(0.0f)) && s::log(0.0f) < 0);
  EXPECT_TRUE(std::isnan(s::log(-1.0f)));
  EXPECT_TRUE(std::isinf(s::log(INFINITY)));
  EXPECT_TRUE(std::isnan(s::log(NAN)));
  EXPECT_NEAR(s::log(1e-40f), std::log(double(1e-40f)), 1e-5);  // denormal input
  EXPECT_EQ(s::sigmoid(-200.0f), 0.0f);
  EXPECT_EQ(s::sigmoid(200.0f), 1.0f);
}

// exp_nonpositive (the fused output layer's softmax exps) is exp bit for bit on x <= 0: every
// float32 exponent from 0 down past the underflow, 1000 mantissas each, and the edges.
TEST(Unary, ExpNonpositiveIsExpBitForBit) {
  namespace s = cpu::simd;
  std::mt19937 gen(3);
  std::uniform_int_distribution<uint32_t> mantissa(0, (1u << 23) - 1);
  for (uint32_t e = 0; e <= 133; ++e)  // |x| from denormal up to 2^6 (x ~ -128)
    for (int i = 0; i < 1000; ++i) {
      const float x = -__builtin_bit_cast(float, (e << 23) | mantissa(gen));
      ASSERT_EQ(__builtin_bit_cast(uint32_t, s::exp_nonpositive(x)),
                __builtin_bit_cast(uint32_t, s::exp(x)))
          << "x = " << x;
    }
  EXPECT_EQ(s::exp_nonpositive(0.0f), 1.0f);
  EXPECT_EQ(s::exp_nonpositive(-0.0f), 1.0f);
  EXPECT_EQ(s::exp_nonpositive(-100.0f), 0.0f);
  EXPECT_EQ(s::exp_nonpositive(-INFINITY), 0.0f);
  EXPECT_TRUE(std::isnan(s::exp_nonpositive(NAN)));
  EXPECT_NEAR(s::exp_nonpositive(-87.3f) / std::exp(double(-87.3f)), 1.0, 1e-6);
}

TEST(Unary, ReluKeepsNanAndIntegers) {
  Tensor x = Tensor::from_vector(std::vector<float>{-1.0f, NAN, 2.0f}, {3});
  auto y = ops::relu(x).to_float_vector();
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_TRUE(std::isnan(y[1]));
  EXPECT_EQ(y[2], 2.0f);
  Tensor i = Tensor::from_vector(std::vector<int64_t>{-3, 0, 5}, {3});
  EXPECT_EQ(ops::relu(i).dtype(), DType::i64);
  EXPECT_EQ(ops::relu(i).to_int_vector(), (std::vector<int64_t>{0, 0, 5}));
  EXPECT_EQ(ops::abs(i).to_int_vector(), (std::vector<int64_t>{3, 0, 5}));
  EXPECT_EQ(ops::square(i).to_int_vector(), (std::vector<int64_t>{9, 0, 25}));
}

TEST(Unary, IntegerInputsPromoteToFloat) {
  Tensor i = Tensor::from_vector(std::vector<int64_t>{0, 1, 4}, {3});
  Tensor y = ops::sqrt(i);
  EXPECT_EQ(y.dtype(), DType::f32);
  EXPECT_EQ(y.to_float_vector(), (std::vector<float>{0.0f, 1.0f, 2.0f}));
  EXPECT_EQ(ops::exp(i).dtype(), DType::f32);
}

TEST(Unary, HalfPrecisionComputesInFloat) {
  Tensor x = Tensor::from_vector(std::vector<float>{-1.0f, 0.5f, 2.0f}, {3});
  for (DType dt : {DType::f16, DType::bf16}) {
    Tensor y = ops::sigmoid(x.to(dt));
    EXPECT_EQ(y.dtype(), dt);
    EXPECT_TRUE(all_close(y.to(DType::f32), ops::sigmoid(x), 1e-2, 1e-3));
  }
}

TEST(Unary, ReluBackwardIsFused) {
  Tensor x = random_input({4, 5}, DType::f32).requires_grad_();
  Tensor y = ops::relu(x);
  ops::sum(y).backward();
  Tensor expected = ops::relu_backward(Tensor::ones({4, 5}), y.detach());
  EXPECT_TRUE(all_close(x.grad(), expected, 0, 0));
  auto gx = x.grad().to_float_vector(), xv = x.to_float_vector();
  for (size_t i = 0; i < xv.size(); ++i) EXPECT_EQ(gx[i], xv[i] > 0 ? 1.0f : 0.0f);
  // A broadcast gradient (from sum's backward) is accepted.
  Tensor g = Tensor::ones({5}).expand({4, 5});
  EXPECT_TRUE(all_close(ops::relu_backward(g, y.detach()), expected, 0, 0));
  EXPECT_TRUE(throws_with([&] { ops::relu_backward(Tensor::ones({3}), y.detach()); },
                          "[relu_backward] grad [3] does not broadcast to output [4, 5]"));
}

TEST(Unary, ErrorsNameTheOp) {
  Tensor b = Tensor::zeros({2}, DType::b8);
  EXPECT_TRUE(throws_with([&] { ops::relu(b); }, "[relu] not supported on bool tensors"));
  EXPECT_TRUE(throws_with([&] { ops::abs(Tensor()); }, "[abs] undefined input"));
  EXPECT_TRUE(throws_with([&] { ops::exp(Tensor()); }, "[exp] undefined input"));
}

// Second derivatives: each gradient is composed of ops, so it is differentiated in turn.
TEST(Unary, SecondDerivatives) {
  struct Case {
    const char* name;
    OpFn f;
    double low, high;
  };
  const std::vector<Case> cases = {
      {"tanh", [](auto& x) { return ops::tanh(x[0]); }, -2, 2},
      {"sigmoid", [](auto& x) { return ops::sigmoid(x[0]); }, -3, 3},
      {"gelu", [](auto& x) { return ops::gelu(x[0]); }, -3, 3},
      {"gelu_tanh", [](auto& x) { return ops::gelu(x[0], true); }, -3, 3},
      {"silu", [](auto& x) { return ops::silu(x[0]); }, -3, 3},
      {"exp", [](auto& x) { return ops::exp(x[0]); }, -2, 2},
      {"log", [](auto& x) { return ops::log(x[0]); }, 0.3, 3},
      {"sqrt", [](auto& x) { return ops::sqrt(x[0]); }, 0.3, 3},
      {"rsqrt", [](auto& x) { return ops::rsqrt(x[0]); }, 0.3, 3},
      {"square", [](auto& x) { return ops::square(x[0]); }, -2, 2},
      {"erf", [](auto& x) { return ops::erf(x[0]); }, -2, 2},
      // Piecewise: second derivative 0 away from the kinks.
      {"relu", [](auto& x) { return ops::relu(x[0]); }, -2, 2},
      {"abs", [](auto& x) { return ops::abs(x[0]); }, -2, 2},
  };
  for (auto& c : cases) {
    SCOPED_TRACE(c.name);
    Tensor x = random_input({2, 3}, DType::f64, true, c.low, c.high).requires_grad_();
    EXPECT_TRUE(gradgradcheck(c.f, {x}));
  }
}

TEST(Unary, ErfMatchesStd) {
  Tensor x = Tensor::from_vector(std::vector<double>{-2.5, -0.3, 0.0, 0.7, 4.0}, {5});
  auto y = ops::erf(x).to_double_vector(), xv = x.to_double_vector();
  for (size_t i = 0; i < xv.size(); ++i) EXPECT_NEAR(y[i], std::erf(xv[i]), 1e-15);
  EXPECT_TRUE(all_close(ops::erf(x.to(DType::f32)), ops::erf(x), 1e-6, 1e-7));
}

// The row max the softmax, cross-entropy and attention kernels share: the exact maximum at every
// length around its 16 partial maxima (tails, the max in the tail or in the first element).
TEST(Unary, RowMaxIsTheMaximumAtEveryLength) {
  std::mt19937 gen(7);
  std::normal_distribution<float> dist(0.0f, 10.0f);
  for (int64_t n = 1; n <= 70; ++n) {
    for (int64_t at : {int64_t(0), n / 2, n - 1}) {
      std::vector<float> x(static_cast<size_t>(n));
      for (float& v : x) v = dist(gen);
      x[size_t(at)] = 1000.0f + float(n);
      EXPECT_EQ(cpu::simd::row_max(x.data(), n), 1000.0f + float(n)) << "n " << n << " at " << at;
      std::vector<double> xd(x.begin(), x.end());
      EXPECT_EQ(cpu::simd::row_max(xd.data(), n), double(1000.0f + float(n)));
    }
  }
  const float ninf = -std::numeric_limits<float>::infinity();
  std::vector<float> masked(33, ninf);
  EXPECT_EQ(cpu::simd::row_max(masked.data(), 33), ninf);
  masked[32] = -5.0f;
  EXPECT_EQ(cpu::simd::row_max(masked.data(), 33), -5.0f);
}
