#include <cmath>

#include "support/op_check.h"

using namespace zenith;
using namespace zenith::testing;

namespace {

struct ReduceCase {
  Shape shape;
  std::vector<int64_t> dims;
  bool keepdim;
  bool noncontiguous;
};

const std::vector<ReduceCase> kCases = {
    {{3, 4}, {}, false, false},     {{3, 4}, {0}, false, true},
    {{3, 4}, {1}, true, false},     {{2, 3, 4}, {0, 2}, false, true},
    {{2, 3, 4}, {-1}, true, true},  {{4, 3, 2, 2}, {0, 2, 3}, false, false},
    {{2, 1, 3}, {1}, false, false}, {{}, {}, false, false},
    {{5}, {0}, true, true}};

// A reference sum in float64 on the host: sums x over `dims` (row-major, keepdim).
std::vector<double> host_sum(const Tensor& x, const std::vector<int64_t>& dims) {
  auto v = x.to_double_vector();
  Shape s = x.shape();
  Shape out_s = s;
  for (auto d : dims) out_s[size_t(d)] = 1;
  std::vector<double> out(size_t(shape_numel(out_s)), 0.0);
  Shape st = contiguous_strides(out_s);
  for (int64_t i = 0; i < int64_t(v.size()); ++i) {
    int64_t r = i, o = 0;
    for (int64_t d = int64_t(s.size()) - 1; d >= 0; --d) {
      int64_t idx = r % s[size_t(d)];
      r /= s[size_t(d)];
      if (out_s[size_t(d)] != 1) o += idx * st[size_t(d)];
    }
    out[size_t(o)] += v[size_t(i)];
  }
  return out;
}

}  // namespace

TEST(Reduce, Sum) {
  for (auto& c : kCases) {
    SCOPED_TRACE(shape_str(c.shape));
    auto f = [&c](const std::vector<Tensor>& x) { return ops::sum(x[0], c.dims, c.keepdim); };
    std::vector<Tensor> in = {random_input(c.shape, DType::f64, c.noncontiguous)};
    EXPECT_TRUE(forward_matches_f64(f, in));
    in[0].requires_grad_();
    EXPECT_TRUE(gradcheck(f, in));
  }
}

TEST(Reduce, Mean) {
  for (auto& c : kCases) {
    SCOPED_TRACE(shape_str(c.shape));
    auto f = [&c](const std::vector<Tensor>& x) { return ops::mean(x[0], c.dims, c.keepdim); };
    std::vector<Tensor> in = {random_input(c.shape, DType::f64, c.noncontiguous)};
    EXPECT_TRUE(forward_matches_f64(f, in));
    in[0].requires_grad_();
    EXPECT_TRUE(gradcheck(f, in));
  }
}

// The layouts the strided sum handles without copying (and the one it copies for), at sizes
// that take the parallel paths, against a float64 host reference.
TEST(Reduce, SumLayoutsMatchReference) {
  struct Layout {
    const char* name;
    Tensor x;
    std::vector<int64_t> dims;
  };
  Tensor nchw = Tensor::randn({8, 16, 24, 24});
  Tensor nc = Tensor::randn({8192, 24});
  std::vector<Layout> layouts = {
      {"bias grad [N, C] over N", nc, {0}},
      {"bias grad [N, C, H, W] over N, H, W", nchw, {0, 2, 3}},
      {"rows [N, C] over C", nc, {1}},
      {"all", nchw, {}},
      {"transposed [C, N]^T over N", Tensor::randn({24, 8192}).t(), {0}},
      {"NHWC view over N, H, W", nchw.permute({0, 2, 3, 1}), {0, 1, 2}},
      {"channels [N, C, H, W] over C", nchw, {1}},
      {"broadcast (stride 0) input", Tensor::randn({1, 300}).expand({400, 300}), {0}},
      {"strided slice", nchw.slice(3, 0, 24, 3), {0, 2, 3}},
      {"one long row", Tensor::randn({1 << 17}), {0}},
  };
  for (auto& l : layouts) {
    SCOPED_TRACE(l.name);
    Tensor got = ops::sum(l.x, l.dims, true);
    std::vector<int64_t> dims = l.dims;
    if (dims.empty())
      for (int64_t d = 0; d < l.x.dim(); ++d) dims.push_back(d);
    Tensor ref = Tensor::from_vector(host_sum(l.x, dims), got.shape());
    EXPECT_TRUE(all_close(got, ref, 1e-5, 1e-3));
  }
}

TEST(Reduce, SumIntegersAndBools) {
  Tensor i = Tensor::from_vector(std::vector<int64_t>{1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(ops::sum(i).dtype(), DType::i64);
  EXPECT_EQ(ops::sum(i).item(), 21);
  EXPECT_EQ(ops::sum(i, {0}).to_int_vector(), (std::vector<int64_t>{5, 7, 9}));
  Tensor b = ops::gt(i, Tensor::scalar(2, DType::i64));
  EXPECT_EQ(ops::sum(b).dtype(), DType::i64);
  EXPECT_EQ(ops::sum(b).item(), 4);
  EXPECT_EQ(ops::sum(Tensor::zeros({0, 3}), {0}).to_float_vector(), (std::vector<float>{0, 0, 0}));
}

TEST(Reduce, MaxMinOverDim) {
  struct Case {
    Shape shape;
    int64_t dim;
    bool keepdim, nc;
  };
  for (auto& c : std::vector<Case>{{{3, 5}, 1, false, false},
                                   {{3, 5}, 0, true, true},
                                   {{2, 3, 4}, 1, false, true},
                                   {{2, 3, 4}, -1, true, false},
                                   {{4}, 0, false, false},
                                   {{}, 0, false, false}}) {
    SCOPED_TRACE(shape_str(c.shape) + " dim " + std::to_string(c.dim));
    for (bool is_max : {true, false}) {
      auto f = [&c, is_max](const std::vector<Tensor>& x) {
        return is_max ? ops::max(x[0], c.dim, c.keepdim) : ops::min(x[0], c.dim, c.keepdim);
      };
      std::vector<Tensor> in = {random_input(c.shape, DType::f64, c.nc)};
      EXPECT_TRUE(forward_matches_f64(f, in));
      in[0].requires_grad_();
      EXPECT_TRUE(gradcheck(f, in));
    }
  }
  Tensor x = Tensor::from_vector(std::vector<double>{1, 5, 2, 7, 0, 7}, {2, 3});
  EXPECT_EQ(ops::max(x, 1).to_double_vector(), (std::vector<double>{5, 7}));
  EXPECT_EQ(ops::min(x, 0).to_double_vector(), (std::vector<double>{1, 0, 2}));
  EXPECT_EQ(ops::max(x, 1, true).shape(), (Shape{2, 1}));
}

TEST(Reduce, MaxDimGradientGoesToTheFirstArgmax) {
  Tensor x = Tensor::from_vector(std::vector<double>{3, 1, 3, 2, 2, 0}, {2, 3}).requires_grad_();
  ops::sum(ops::max(x, 1)).backward();
  EXPECT_EQ(x.grad().to_double_vector(), (std::vector<double>{1, 0, 0, 1, 0, 0}));
}

TEST(Reduce, MaxMinAll) {
  for (bool nc : {false, true}) {
    std::vector<Tensor> in = {random_input({3, 4}, DType::f64, nc)};
    auto fmax = [](const std::vector<Tensor>& x) { return ops::max(x[0]); };
    auto fmin = [](const std::vector<Tensor>& x) { return ops::min(x[0]); };
    EXPECT_TRUE(forward_matches_f64(fmax, in));
    EXPECT_TRUE(forward_matches_f64(fmin, in));
    in[0].requires_grad_();
    EXPECT_TRUE(gradcheck(fmax, in));
    EXPECT_TRUE(gradcheck(fmin, in));
  }
  // Ties share the gradient evenly.
  Tensor x = Tensor::from_vector(std::vector<double>{4, 1, 4, 4}, {2, 2}).requires_grad_();
  Tensor m = ops::max(x);
  EXPECT_EQ(m.dim(), 0);
  EXPECT_EQ(m.item(), 4);
  m.backward();
  double third = 1.0 / 3.0;
  EXPECT_EQ(x.grad().to_double_vector(), (std::vector<double>{third, 0, third, third}));
  // Large inputs take the parallel path.
  Tensor big = Tensor::randn({300000});
  auto v = big.to_float_vector();
  EXPECT_EQ(ops::max(big).item(), *std::max_element(v.begin(), v.end()));
  EXPECT_EQ(ops::min(big).item(), *std::min_element(v.begin(), v.end()));
}

TEST(Reduce, Argmax) {
  Tensor x = Tensor::from_vector(std::vector<float>{1, 9, 2, 9, 4, 3}, {2, 3});
  Tensor a = ops::argmax(x, 1);
  EXPECT_EQ(a.dtype(), DType::i64);
  EXPECT_EQ(a.to_int_vector(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(ops::argmax(x, 0).to_int_vector(), (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ(ops::argmax(x, -1, true).shape(), (Shape{2, 1}));
  Tensor r = random_input({4, 5}, DType::f32, true);
  EXPECT_TRUE(all_close(ops::argmax(r, 0).to(DType::f64),
                        ops::argmax(r.contiguous(), 0).to(DType::f64), 0, 0));
  Tensor g = Tensor::randn({3, 4}).requires_grad_();
  EXPECT_FALSE(ops::argmax(g, 1).requires_grad());
}

TEST(Reduce, MaxPropagatesNan) {
  Tensor x = Tensor::from_vector(std::vector<float>{1, NAN, 3, 0, 2, 1}, {2, 3});
  auto v = ops::max(x, 1).to_float_vector();
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_EQ(v[1], 2.0f);
  EXPECT_EQ(ops::argmax(x, 1).to_int_vector(), (std::vector<int64_t>{1, 1}));
  EXPECT_TRUE(std::isnan(ops::max(x).item()));
  EXPECT_TRUE(std::isnan(ops::min(x).item()));
  EXPECT_TRUE(std::isnan(ops::min(x, 0).to_float_vector()[1]));
}

TEST(Reduce, Var) {
  for (auto& c : kCases) {
    if (c.shape.empty()) continue;
    SCOPED_TRACE(shape_str(c.shape));
    for (bool unbiased : {true, false}) {
      auto f = [&c, unbiased](const std::vector<Tensor>& x) {
        return ops::var(x[0], c.dims, unbiased, c.keepdim);
      };
      std::vector<Tensor> in = {random_input(c.shape, DType::f64, c.noncontiguous)};
      if (unbiased && c.shape == Shape{2, 1, 3} && c.dims == std::vector<int64_t>{1}) continue;
      EXPECT_TRUE(forward_matches_f64(f, in));
      in[0].requires_grad_();
      EXPECT_TRUE(gradcheck(f, in));
    }
  }
  Tensor x = Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 6, 8}, {2, 3});
  EXPECT_EQ(ops::var(x, {1}).to_double_vector(), (std::vector<double>{1, 4}));
  auto biased = ops::var(x, {1}, false).to_double_vector();
  EXPECT_NEAR(biased[0], 2.0 / 3.0, 1e-15);
  EXPECT_NEAR(biased[1], 8.0 / 3.0, 1e-15);
  // var over all: mean 4, squared deviations 9+4+1+0+4+16 = 34, / 5
  EXPECT_NEAR(ops::var(x).item(), 34.0 / 5.0, 1e-14);
  EXPECT_EQ(ops::var(x, {0}, true, true).shape(), (Shape{1, 3}));
  // One element with the unbiased estimator is NaN, as in PyTorch.
  EXPECT_TRUE(std::isnan(ops::var(Tensor::ones({1})).item()));
}

TEST(Reduce, Errors) {
  Tensor x = Tensor::zeros({2, 3});
  EXPECT_TRUE(throws_with([&] { ops::sum(x, {2}); }, "[sum] dim 2 out of range for 2-d tensor"));
  EXPECT_TRUE(throws_with([&] { ops::max(x, -3); }, "[max] dim -3 out of range"));
  EXPECT_TRUE(throws_with([&] { ops::argmax(x, 5); }, "[argmax] dim 5 out of range"));
  EXPECT_TRUE(throws_with([&] { ops::var(x, {7}); }, "[var] dim 7 out of range"));
  EXPECT_TRUE(throws_with(
      [&] {
        ops::max(Tensor::zeros({0, 3}));
      },
      "[max] cannot reduce an empty tensor of shape [0, 3]"));
  EXPECT_TRUE(throws_with(
      [&] {
        ops::min(Tensor::zeros({0, 3}), 0);
      },
      "[min] cannot reduce dim 0 of size 0 in shape [0, 3]"));
  EXPECT_TRUE(throws_with([&] { ops::var(Tensor::arange(4)); }, "[var] expected a floating"));
}
