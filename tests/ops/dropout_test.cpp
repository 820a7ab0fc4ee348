// ops::dropout (src/ops/dropout.cpp).
#include "support/op_check.h"

using namespace zenith;
using namespace zenith::testing;

TEST(Dropout, StatisticsAndScaling) {
  manual_seed(123);
  const double p = 0.3;
  Tensor x = Tensor::ones({200, 500});
  Tensor y = ops::dropout(x, p, true);
  auto v = y.to_double_vector();
  int64_t zeros = 0;
  double sum = 0;
  for (double e : v) {
    if (e == 0)
      ++zeros;
    else
      EXPECT_NEAR(e, 1 / (1 - p), 1e-6);
    sum += e;
  }
  double frac = double(zeros) / double(v.size());
  EXPECT_NEAR(frac, p, 0.01);                      // 100k draws: sd ~ 0.0015
  EXPECT_NEAR(sum / double(v.size()), 1.0, 0.01);  // expectation preserved
}

TEST(Dropout, GradientUsesTheSameMask) {
  Tensor x = Tensor::randn({8, 16}, DType::f64).requires_grad_();
  Tensor y = ops::dropout(x, 0.5, true);
  ops::sum(y).backward();
  auto g = x.grad().to_double_vector(), yv = y.to_double_vector();
  for (size_t i = 0; i < g.size(); ++i) EXPECT_EQ(g[i] == 0, yv[i] == 0);
}

TEST(Dropout, EvalAndEdgeCases) {
  Tensor x = Tensor::randn({4, 4});
  EXPECT_TRUE(ops::dropout(x, 0.5, false).is_same(x));
  EXPECT_TRUE(all_close(ops::dropout(x, 0.0, true), x, 0, 0));
  EXPECT_TRUE(all_close(ops::dropout(x, 1.0, true), Tensor::zeros({4, 4}), 0, 0));
  manual_seed(7);
  Tensor a = ops::dropout(x, 0.5, true);
  manual_seed(7);
  EXPECT_TRUE(all_close(ops::dropout(x, 0.5, true), a, 0, 0));  // seeded: same mask
  EXPECT_TRUE(throws_with([&] { ops::dropout(x, 1.5, true); }, "[dropout] p must be in [0, 1]"));
}
