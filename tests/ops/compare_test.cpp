#include "support/op_check.h"

using namespace zenith;
using namespace zenith::testing;

namespace {

// Elementwise reference: f applied on host copies broadcast by the op under test's own shape.
void check_compare(const std::function<Tensor(const Tensor&, const Tensor&)>& op,
                   const std::function<bool(double, double)>& ref) {
  // Values on a coarse grid so that ties occur.
  Tensor a = ops::div(Tensor::randint(0, 4, {2, 3, 4}, DType::i64).to(DType::f32), 2.0);
  Tensor b = ops::div(Tensor::randint(0, 4, {3, 1}, DType::i64).to(DType::f32), 2.0);
  Tensor a_nc = a.transpose(1, 2).contiguous().transpose(1, 2);  // same values, strided
  for (const Tensor& x : {a, a_nc}) {
    Tensor y = op(x, b);
    EXPECT_EQ(y.dtype(), DType::b8);
    ASSERT_EQ(y.shape(), (Shape{2, 3, 4}));
    auto yv = y.to_double_vector();
    auto av = x.to_double_vector();
    auto bv = b.to_double_vector();
    for (int64_t i = 0; i < 24; ++i) {
      int64_t row = (i / 4) % 3;
      EXPECT_EQ(yv[size_t(i)] != 0, ref(av[size_t(i)], bv[size_t(row)])) << i;
    }
  }
}

}  // namespace

TEST(Compare, Eq) {
  check_compare(ops::eq, [](double a, double b) { return a == b; });
}
TEST(Compare, Ne) {
  check_compare(ops::ne, [](double a, double b) { return a != b; });
}
TEST(Compare, Lt) {
  check_compare(ops::lt, [](double a, double b) { return a < b; });
}
TEST(Compare, Le) {
  check_compare(ops::le, [](double a, double b) { return a <= b; });
}
TEST(Compare, Gt) {
  check_compare(ops::gt, [](double a, double b) { return a > b; });
}
TEST(Compare, Ge) {
  check_compare(ops::ge, [](double a, double b) { return a >= b; });
}

TEST(Compare, PromotesMixedDtypesAndHasNoGradient) {
  Tensor i = Tensor::from_vector(std::vector<int64_t>{1, 2, 3}, {3});
  Tensor f = Tensor::from_vector(std::vector<float>{1.5f, 2.0f, 2.5f}, {3}).requires_grad_();
  Tensor y = ops::lt(i, f);
  EXPECT_EQ(y.to_int_vector(), (std::vector<int64_t>{1, 0, 0}));
  EXPECT_FALSE(y.requires_grad());
  EXPECT_EQ(ops::eq(i, Tensor::scalar(2, DType::i64)).to_int_vector(),
            (std::vector<int64_t>{0, 1, 0}));
  Tensor n = Tensor::from_vector(std::vector<float>{NAN}, {1});
  EXPECT_EQ(ops::eq(n, n).to_int_vector(), (std::vector<int64_t>{0}));
  EXPECT_EQ(ops::ne(n, n).to_int_vector(), (std::vector<int64_t>{1}));
}

TEST(Compare, Where) {
  struct Case {
    Shape c, a, b;
    bool nc;
  };
  for (auto& k : std::vector<Case>{{{3, 4}, {3, 4}, {3, 4}, false},
                                   {{3, 1}, {4}, {3, 4}, true},
                                   {{2, 3, 4}, {3, 4}, {}, true},
                                   {{}, {5}, {5}, false}}) {
    SCOPED_TRACE(shape_str(k.c) + " " + shape_str(k.a) + " " + shape_str(k.b));
    Tensor cond = ops::gt(Tensor::rand(k.c), Tensor::scalar(0.5));
    auto f = [cond](const std::vector<Tensor>& x) { return ops::where(cond, x[0], x[1]); };
    std::vector<Tensor> in = {random_input(k.a, DType::f64, k.nc), random_input(k.b)};
    EXPECT_TRUE(forward_matches_f64(f, in));
    in[0].requires_grad_();
    in[1].requires_grad_();
    EXPECT_TRUE(gradcheck(f, in));
  }
  Tensor cond = Tensor::from_vector(std::vector<int64_t>{1, 0, 1}, {3}, DType::b8);
  Tensor a = Tensor::from_vector(std::vector<double>{1, 2, 3}, {3});
  Tensor b = Tensor::from_vector(std::vector<double>{-1, -2, -3}, {3});
  EXPECT_EQ(ops::where(cond, a, b).to_double_vector(), (std::vector<double>{1, -2, 3}));
  Tensor ia = Tensor::from_vector(std::vector<int64_t>{7, 8, 9}, {3});
  EXPECT_EQ(ops::where(cond, ia, b).dtype(), DType::f64);
}

TEST(Compare, MaskedFill) {
  for (auto& [xs, ms] :
       std::vector<std::pair<Shape, Shape>>{{{3, 4}, {3, 4}}, {{2, 3, 4}, {3, 1}}, {{2, 3}, {}}}) {
    for (bool nc : {false, true}) {
      SCOPED_TRACE(shape_str(xs) + " mask " + shape_str(ms) + (nc ? " noncontiguous" : ""));
      Tensor mask = ops::gt(Tensor::rand(ms), Tensor::scalar(0.5));
      auto f = [mask](const std::vector<Tensor>& x) { return ops::masked_fill(x[0], mask, -2.5); };
      std::vector<Tensor> in = {random_input(xs, DType::f64, nc)};
      EXPECT_TRUE(forward_matches_f64(f, in));
      in[0].requires_grad_();
      EXPECT_TRUE(gradcheck(f, in));
    }
  }
  Tensor x = Tensor::from_vector(std::vector<double>{1, 2, 3, 4}, {2, 2}).requires_grad_();
  Tensor mask = Tensor::from_vector(std::vector<int64_t>{0, 1}, {2}, DType::b8);
  Tensor y = ops::masked_fill(x, mask, -1e9);
  EXPECT_EQ(y.to_double_vector(), (std::vector<double>{1, -1e9, 3, -1e9}));
  ops::sum(y).backward();
  EXPECT_EQ(x.grad().to_double_vector(), (std::vector<double>{1, 0, 1, 0}));
}

TEST(Compare, Errors) {
  Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({4});
  EXPECT_TRUE(throws_with([&] { ops::eq(a, b); }, "[eq] shapes [2, 3] and [4]"));
  EXPECT_TRUE(throws_with([&] { ops::ge(a, b); }, "[ge] shapes [2, 3] and [4]"));
  Tensor c = Tensor::zeros({2, 3}, DType::b8);
  EXPECT_TRUE(throws_with([&] { ops::where(a, a, a); }, "[where] condition must be bool"));
  EXPECT_TRUE(throws_with([&] { ops::where(c, a, b); },
                          "[where] shapes [2, 3] (condition), [2, 3] and [4]"));
  EXPECT_TRUE(throws_with(
      [&] {
        ops::masked_fill(a, Tensor::zeros({3, 3}, DType::b8), 0);
      },
      "[masked_fill] mask of shape [3, 3] does not broadcast to the input's "
      "shape [2, 3]"));
  EXPECT_TRUE(throws_with([&] { ops::masked_fill(a, a, 0); }, "[masked_fill] mask must be bool"));
}
