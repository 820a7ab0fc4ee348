#include "support/op_check.h"

using namespace zenith;
using namespace zenith::testing;

namespace {
Tensor ints(const std::vector<int64_t>& v, const Shape& s) { return Tensor::from_vector(v, s); }
}  // namespace

TEST(Index, Embedding) {
  Tensor idx = ints({2, 0, 2, 4, 1, 2}, {2, 3});  // repeated rows scatter-add in the gradient
  auto f = [idx](const std::vector<Tensor>& x) { return ops::embedding(x[0], idx); };
  for (bool nc : {false, true}) {
    std::vector<Tensor> in = {random_input({5, 4}, DType::f64, nc)};
    EXPECT_TRUE(forward_matches_f64(f, in));
    in[0].requires_grad_();
    EXPECT_TRUE(gradcheck(f, in));
  }
  Tensor w =
      Tensor::from_vector(std::vector<double>{0, 1, 10, 11, 20, 21}, {3, 2}).requires_grad_();
  Tensor y = ops::embedding(w, ints({2, 2, 0}, {3}));
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
  EXPECT_EQ(y.to_double_vector(), (std::vector<double>{20, 21, 20, 21, 0, 1}));
  ops::sum(y).backward();
  EXPECT_EQ(w.grad().to_double_vector(), (std::vector<double>{1, 1, 0, 0, 2, 2}));
  Tensor i32 = ints({1}, {1}).to(DType::i32);
  EXPECT_EQ(ops::embedding(w, i32).to_double_vector(), (std::vector<double>{10, 11}));
  // Large gradients (parallel over columns) still add repeated rows correctly.
  Tensor big = Tensor::zeros({10, 4096}).requires_grad_();
  ops::sum(ops::embedding(big, Tensor::randint(0, 10, {64}))).backward();
  EXPECT_EQ(ops::sum(big.grad()).item(), 64.0 * 4096);
}

// A 16-bit table (a LLaMA checkpoint's embed_tokens) gives float32 rows, exactly its values;
// a table that trains gets its gradient in its own dtype.
TEST(Index, EmbeddingOf16BitTable) {
  for (DType dtype : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor w = random_input({7, 12}, DType::f32).to(dtype);
    Tensor idx = ints({6, 0, 6, 3}, {2, 2});
    Tensor y = ops::embedding(w, idx);
    EXPECT_EQ(y.dtype(), DType::f32);
    EXPECT_TRUE(all_close(y, ops::embedding(w.to(DType::f32), idx), 0, 0));
    w.requires_grad_();
    ops::sum(ops::embedding(w, idx)).backward();
    EXPECT_EQ(w.grad().dtype(), dtype);
    EXPECT_EQ(ops::sum(w.grad().to(DType::f32)).item(), 4.0 * 12);
  }
}

TEST(Index, EmbeddingErrors) {
  Tensor w = Tensor::zeros({10, 3});
  EXPECT_TRUE(throws_with(
      [&] {
        ops::embedding(w, ints({3, 10}, {2}));
      },
      "[embedding] index 10 is out of range for 10 rows"));
  EXPECT_TRUE(throws_with([&] { ops::embedding(w, ints({-1}, {1})); },
                          "[embedding] index -1 is out of range for 10 rows"));
  EXPECT_TRUE(throws_with([&] { ops::embedding(Tensor::zeros({10}), ints({0}, {1})); },
                          "[embedding] weight must be 2-d"));
  EXPECT_TRUE(throws_with([&] { ops::embedding(w, Tensor::zeros({2})); },
                          "[embedding] index must be int64 or int32, got float32"));
}

TEST(Index, Cat) {
  struct Case {
    std::vector<Shape> shapes;
    int64_t dim;
  };
  for (auto& c : std::vector<Case>{{{{2, 3}, {4, 3}}, 0},
                                   {{{2, 3}, {2, 1}, {2, 5}}, 1},
                                   {{{2, 3, 4}, {2, 2, 4}}, -2},
                                   {{{3}, {0}, {2}}, 0},
                                   {{{2, 3}}, 1}}) {
    SCOPED_TRACE(std::to_string(c.dim));
    std::vector<Tensor> in;
    for (size_t i = 0; i < c.shapes.size(); ++i)
      in.push_back(random_input(c.shapes[i], DType::f64, i % 2 == 0));
    auto f = [&c](const std::vector<Tensor>& x) { return ops::cat(x, c.dim); };
    EXPECT_TRUE(forward_matches_f64(f, in));
    for (auto& t : in) t.requires_grad_();
    EXPECT_TRUE(gradcheck(f, in));
  }
  Tensor a = Tensor::from_vector(std::vector<double>{1, 2}, {1, 2});
  Tensor b = Tensor::from_vector(std::vector<double>{3, 4}, {1, 2});
  EXPECT_EQ(ops::cat({a, b}, 0).to_double_vector(), (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(ops::cat({a, b}, 1).to_double_vector(), (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(ops::cat({a, b}, 1).shape(), (Shape{1, 4}));
  // Mixed dtypes promote; the legacy 1-d empty tensor is skipped.
  Tensor i = ints({5, 6}, {1, 2});
  EXPECT_EQ(ops::cat({i, a}, 0).dtype(), DType::f64);
  EXPECT_EQ(ops::cat({Tensor::zeros({0}), a}, 0).shape(), (Shape{1, 2}));
}

TEST(Index, CatErrors) {
  Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({3, 4});
  EXPECT_TRUE(throws_with(
      [&] {
        ops::cat({a, b}, 0);
      },
      "[cat] sizes must match except in dim 0: tensor 0 is [2, 3], tensor 1 "
      "is [3, 4]"));
  EXPECT_TRUE(throws_with([&] { ops::cat({a, Tensor::zeros({2})}, 0); }, "tensor 1 is [2]"));
  EXPECT_TRUE(throws_with([&] { ops::cat({}, 0); }, "[cat] expected at least one tensor"));
  EXPECT_TRUE(throws_with([&] { ops::cat({a}, 2); }, "[cat] dim 2 out of range"));
  EXPECT_TRUE(throws_with([&] { ops::cat({Tensor::scalar(1)}, 0); }, "[cat] zero-dimensional"));
}

TEST(Index, Stack) {
  for (int64_t dim : {0, 1, 2, -1}) {
    SCOPED_TRACE(dim);
    std::vector<Tensor> in = {random_input({2, 3}, DType::f64, true), random_input({2, 3}),
                              random_input({2, 3})};
    auto f = [dim](const std::vector<Tensor>& x) { return ops::stack(x, dim); };
    EXPECT_TRUE(forward_matches_f64(f, in));
    for (auto& t : in) t.requires_grad_();
    EXPECT_TRUE(gradcheck(f, in));
  }
  Tensor a = Tensor::from_vector(std::vector<double>{1, 2}, {2});
  Tensor b = Tensor::from_vector(std::vector<double>{3, 4}, {2});
  EXPECT_EQ(ops::stack({a, b}, 1).shape(), (Shape{2, 2}));
  EXPECT_EQ(ops::stack({a, b}, 1).to_double_vector(), (std::vector<double>{1, 3, 2, 4}));
  EXPECT_EQ(ops::stack({Tensor::scalar(1), Tensor::scalar(2)}, 0).shape(), (Shape{2}));
  EXPECT_TRUE(throws_with(
      [&] {
        ops::stack({a, Tensor::zeros({3})}, 0);
      },
      "[stack] all tensors must have one shape: tensor 0 is [2], tensor 1 is "
      "[3]"));
  EXPECT_TRUE(throws_with([&] { ops::stack({a, b}, 2); }, "[stack] dim 2 out of range"));
}

TEST(Index, IndexSelect) {
  Tensor idx = ints({2, 0, 2}, {3});
  for (int64_t dim : {0, 1, -1}) {
    SCOPED_TRACE(dim);
    auto f = [dim, idx](const std::vector<Tensor>& x) { return ops::index_select(x[0], dim, idx); };
    std::vector<Tensor> in = {random_input({3, 4, 3}, DType::f64, true)};
    EXPECT_TRUE(forward_matches_f64(f, in));
    in[0].requires_grad_();
    EXPECT_TRUE(gradcheck(f, in));
  }
  Tensor x = Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3}).requires_grad_();
  Tensor y = ops::index_select(x, 1, ints({2, 2, 0}, {3}));
  EXPECT_EQ(y.to_double_vector(), (std::vector<double>{3, 3, 1, 6, 6, 4}));
  ops::sum(y).backward();
  EXPECT_EQ(x.grad().to_double_vector(), (std::vector<double>{1, 0, 2, 1, 0, 2}));
  EXPECT_EQ(ops::index_select(x.detach(), 0, Tensor::scalar(1, DType::i64)).shape(), (Shape{1, 3}));
  EXPECT_TRUE(throws_with(
      [&] {
        ops::index_select(x, 1, ints({0, 3}, {2}));
      },
      "[index_select] index 3 is out of bounds for dim 1 with size 3"));
  EXPECT_TRUE(throws_with([&] { ops::index_select(x, 2, ints({0}, {1})); },
                          "[index_select] dim 2 out of range"));
  EXPECT_TRUE(throws_with(
      [&] {
        ops::index_select(x, 0, ints({0, 1}, {1, 2}));
      },
      "[index_select] index must be 0-d or 1-d, got shape [1, 2]"));
}

TEST(Index, Gather) {
  // index smaller than x outside dim, repeated positions along dim
  Tensor idx0 = ints({0, 2, 1, 2, 2, 0}, {2, 3});
  Tensor idx1 = ints({3, 3, 0, 1, 0, 0}, {3, 2});
  auto f0 = [idx0](const std::vector<Tensor>& x) { return ops::gather(x[0], 0, idx0); };
  auto f1 = [idx1](const std::vector<Tensor>& x) { return ops::gather(x[0], -1, idx1); };
  for (bool nc : {false, true}) {
    std::vector<Tensor> in = {random_input({3, 4}, DType::f64, nc)};
    EXPECT_TRUE(forward_matches_f64(f0, in));
    EXPECT_TRUE(forward_matches_f64(f1, in));
    in[0].requires_grad_();
    EXPECT_TRUE(gradcheck(f0, in));
    EXPECT_TRUE(gradcheck(f1, in));
  }
  Tensor x = Tensor::from_vector(std::vector<double>{1, 2, 3, 4}, {2, 2}).requires_grad_();
  Tensor y = ops::gather(x, 1, ints({0, 0, 1, 0}, {2, 2}));
  EXPECT_EQ(y.to_double_vector(), (std::vector<double>{1, 1, 4, 3}));
  ops::sum(y).backward();
  EXPECT_EQ(x.grad().to_double_vector(), (std::vector<double>{2, 0, 1, 1}));
  EXPECT_TRUE(throws_with(
      [&] {
        ops::gather(x, 1, ints({0, 2}, {2, 1}));
      },
      "[gather] index 2 is out of bounds for dim 1 with size 2"));
  EXPECT_TRUE(throws_with(
      [&] {
        ops::gather(x, 1, ints({0, 0, 0}, {3, 1}));
      },
      "[gather] index of shape [3, 1] does not fit input of shape [2, 2]"));
  EXPECT_TRUE(throws_with([&] { ops::gather(x, 0, ints({0}, {1})); },
                          "[gather] index of shape [1] does not fit input of shape [2, 2]"));
}
