// Metrics on hand-made logits.
#include <gtest/gtest.h>

#include "support/op_check.h"
#include "zenith/train.h"

using zenith::Tensor;

namespace {

// Three samples, four classes: predictions 2, 0, 3.
Tensor logits() {
  return Tensor::from_vector(std::vector<float>{0.1f, 0.2f, 0.9f, 0.3f,  //
                                                0.8f, 0.7f, 0.1f, 0.0f,  //
                                                0.2f, 0.1f, 0.4f, 0.6f},
                             {3, 4});
}
Tensor labels(std::vector<int64_t> v) { return Tensor::from_vector(v, {int64_t(v.size())}); }

TEST(Metrics, AccuracyTopKLoss) {
  auto acc = zenith::metrics::Accuracy();
  acc->clear();
  acc->update(logits(), labels({2, 1, 3}), 0.5);
  EXPECT_DOUBLE_EQ(acc->eval(), 2.0 / 3.0);
  acc->update(logits(), labels({2, 0, 3}), 0.5);
  EXPECT_DOUBLE_EQ(acc->eval(), 5.0 / 6.0);
  acc->clear();
  EXPECT_TRUE(zenith::testing::throws_with([&] { acc->eval(); }, "no samples"));

  auto top2 = zenith::metrics::TopKCategoricalAccuracy(2);
  top2->clear();
  top2->update(logits(), labels({3, 1, 0}), 0);  // ranks 2, 2, 3
  EXPECT_DOUBLE_EQ(top2->eval(), 2.0 / 3.0);

  auto loss = zenith::metrics::Loss();
  loss->clear();
  loss->update(logits(), labels({0, 0, 0}), 1.0);
  loss->update(logits().slice(0, 0, 1), labels({0}), 3.0);
  EXPECT_DOUBLE_EQ(loss->eval(), 6.0 / 4.0);
}

TEST(Metrics, ConfusionMatrix) {
  zenith::metrics::ConfusionMatrix cm(4);
  cm.update(logits(), labels({2, 1, 3}), 0);
  EXPECT_EQ(cm.matrix()[2][2], 1);
  EXPECT_EQ(cm.matrix()[1][0], 1);
  EXPECT_EQ(cm.matrix()[3][3], 1);
  EXPECT_DOUBLE_EQ(cm.eval(), 2.0 / 3.0);
  EXPECT_TRUE(zenith::testing::throws_with(
      [&] {
        cm.update(logits(), labels({2, 9, 3}), 0);
      },
      "out of range"));
}

}  // namespace
