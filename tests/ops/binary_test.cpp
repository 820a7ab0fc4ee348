#include "support/op_check.h"

using namespace zenith;
using namespace zenith::testing;

namespace {

struct BinaryCase {
  Shape a, b;
  bool noncontiguous;
};

const std::vector<BinaryCase> kCases = {
    {{3, 4}, {3, 4}, false}, {{3, 4}, {4}, false},    {{2, 1, 5}, {3, 1}, true},
    {{5}, {}, false},        {{2, 3, 4}, {2, 3, 4}, true}};

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

TEST(Binary, Add) { check_binary([](auto& x) { return ops::add(x[0], x[1]); }); }
TEST(Binary, Sub) { check_binary([](auto& x) { return ops::sub(x[0], x[1]); }); }
TEST(Binary, Mul) { check_binary([](auto& x) { return ops::mul(x[0], x[1]); }); }
TEST(Binary, Div) { check_binary([](auto& x) { return ops::div(x[0], x[1]); }, 0.5, 2.0); }

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
