// Shape rules shared by ops and kernels (src/core/shape.h).
#include "core/shape.h"

#include "support/op_check.h"

using namespace zenith;
using namespace zenith::testing;

TEST(Shape, BroadcastShapes) {
  EXPECT_EQ(broadcast_shapes({2, 1, 4}, {3, 1}, "t"), (Shape{2, 3, 4}));
  EXPECT_EQ(broadcast_shapes({}, {5}, "t"), (Shape{5}));
  EXPECT_TRUE(throws_with(
      [] {
        broadcast_shapes({2, 3}, {4}, "mul");
      },
      "[mul] shapes [2, 3] and [4] cannot be broadcast together"));
}

TEST(Shape, PoolWindows) {
  // kernel 3, stride 2, padding 1 over 5 cells: outputs read [-1, 2), [1, 4), [3, 6).
  PoolWindow w0 = pool_window(0, 3, 2, 1, 5), w2 = pool_window(2, 3, 2, 1, 5);
  EXPECT_EQ(w0.begin, 0);
  EXPECT_EQ(w0.end, 2);
  EXPECT_EQ(w0.padded, 3);
  EXPECT_EQ(w2.begin, 3);
  EXPECT_EQ(w2.end, 5);
  EXPECT_EQ(w2.padded, 3);
  // The window stops where the padding ends: kernel 3, stride 3, padding 1 over 4 cells.
  PoolWindow last = pool_window(1, 3, 3, 1, 4);
  EXPECT_EQ(last.end, 4);
  EXPECT_EQ(last.padded, 3);
  // Adaptive 7 -> 3: [0, 3), [2, 5), [4, 7).
  for (int64_t o = 0; o < 3; ++o) {
    PoolWindow a = adaptive_pool_window(o, 7, 3);
    EXPECT_EQ(a.begin, 2 * o);
    EXPECT_EQ(a.end, 2 * o + 3);
  }
}
