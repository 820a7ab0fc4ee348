// graph mode's conv2d_relu_max_pool and its backward (src/backend/cpu/conv_pool.cpp): the fused
// kernels against relu(max_pool2d(conv2d(x, w, b))) and its weight gradient in float64, in both
// blocked layouts, and the backward against finite differences of the fused forward.
#include "backend/cpu/conv_pool.h"

#include <cstring>

#include "core/dispatch.h"
#include "support/op_check.h"

using namespace zenith;
using namespace zenith::testing;

namespace {

// The geometry ops::conv2d resolves for a 3x3 "valid" convolution of x by O filters.
Conv2dAttrs valid_3x3(const Shape& x, int64_t O, bool bias) {
  return {.input_shape = x,
          .weight_shape = {O, x[1], 3, 3},
          .output_shape = {x[0], O, x[2] - 2, x[3] - 2},
          .bias = bias};
}

Tensor to_plain(const Tensor& t) { return dispatch::call1<OpId::to_plain>({t}); }

// Small integers: every convolution output is exact in float32, so windows tie exactly.
Tensor integers(const Shape& s, int64_t seed) {
  std::vector<double> v(size_t(shape_numel(s)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = double(int64_t((i * 7 + size_t(seed)) % 3) - 1);
  return Tensor::from_vector(v, s);
}

struct Case {
  const char* name;
  Shape x;
  bool bias;
  bool ties;
};

const std::vector<Case> kCases = {
    {"cin1 even", {2, 1, 8, 8}, false, false},
    {"cin1 odd, bias", {1, 1, 9, 7}, true, false},  // conv 7x5: a row and a column dropped
    {"cin3 even, bias", {2, 3, 8, 10}, true, false},
    {"cin3 odd", {1, 3, 7, 9}, false, false},
    {"cin3 ties", {2, 3, 8, 8}, true, true},
    {"cin4 odd ties", {1, 4, 9, 9}, false, true},
};

TEST(ConvReluMaxPool, FusedKernelsMatchFloat64) {
  // 32 channels: blocks of 16, and of 8 in pairs (forward_block_pair); 24: blocks of 8 alone.
  for (auto [O, block] : {std::pair<int64_t, int>{32, 8}, {32, 16}, {24, 8}})
    for (const Case& c : kCases) {
      SCOPED_TRACE(std::string(c.name) + " O " + std::to_string(O) + " block " +
                   std::to_string(block));
      manual_seed(21);
      const Conv2dAttrs a = valid_3x3(c.x, O, c.bias);
      ASSERT_TRUE(cpu::conv_relu_max_pool_fits(a, DType::f32));
      const Shape pooled = cpu::conv_relu_max_pool_shape(a);
      Tensor x64 = c.ties ? integers(c.x, 1) : random_input(c.x);
      Tensor w64 = c.ties ? integers({O, c.x[1], 3, 3}, 2) : random_input({O, c.x[1], 3, 3});
      Tensor b64 = c.ties ? integers({O}, 0) : random_input({O});
      Tensor dy64 = random_input(pooled);
      Tensor w_ref = w64.detach().clone().requires_grad_(), b_ref = b64.detach().clone();
      if (c.bias) b_ref.requires_grad_();
      Tensor y_ref =
          ops::relu(ops::max_pool2d(ops::conv2d(x64, w_ref, c.bias ? b_ref : Tensor()), {2}));
      ASSERT_EQ(y_ref.shape(), pooled);
      ops::sum(ops::mul(y_ref, dy64)).backward();

      std::vector<Tensor> f = cpu::conv_relu_max_pool(
          x64.to(DType::f32), w64.to(DType::f32), c.bias ? b64.to(DType::f32) : Tensor(), a, block);
      EXPECT_TRUE(cpu::is_conv_relu_max_pool_workspace(f[1], a));
      EXPECT_EQ(f[1].size(4), block);
      EXPECT_TRUE(all_close(to_plain(f[0]).to(DType::f64), y_ref.detach(), 1e-5, 1e-6));
      std::vector<Tensor> g =
          cpu::conv_relu_max_pool_backward(dy64.to(DType::f32), x64.to(DType::f32), f[1], a);
      EXPECT_TRUE(all_close(g[0].to(DType::f64), w_ref.grad(), 1e-5, 1e-5));
      EXPECT_EQ(g[1].defined(), c.bias);
      if (c.bias) {
        EXPECT_TRUE(all_close(g[1].to(DType::f64), b_ref.grad(), 1e-5, 1e-5));
      }
      // The ops through the dispatcher: the kernel in float32 (its block from the CPU), the
      // decomposition in float64 (which recomputes the forward from x, weight and bias).
      for (DType dt : {DType::f32, DType::f64}) {
        SCOPED_TRACE(dtype_name(dt));
        std::vector<Tensor> in = {x64.to(dt), w64.to(dt), c.bias ? b64.to(dt) : Tensor()};
        std::vector<Tensor> fo = dispatch::call<OpId::conv2d_relu_max_pool>(in, a);
        EXPECT_TRUE(all_close(to_plain(fo[0]).to(DType::f64), y_ref.detach(), 1e-5, 1e-6));
        std::vector<Tensor> go = dispatch::call<OpId::conv2d_relu_max_pool_backward>(
            {dy64.to(dt), in[0], in[1], in[2], fo[1]}, a);
        EXPECT_TRUE(all_close(go[0].to(DType::f64), w_ref.grad(), 1e-5, 1e-5));
        if (c.bias) {
          EXPECT_TRUE(all_close(go[1].to(DType::f64), b_ref.grad(), 1e-5, 1e-5));
        }
      }
    }
}

// Without a bias, the fused forward sums each convolution output in oneDNN's order, so its pooled
// values have the bits of relu(max_pool2d(conv2d(x, w))) through oneDNN (AVX-512 and AVX2 hosts):
// the windows' maxima, and so the gradient's path, are eager mode's. Every kernel: blocks of 16,
// blocks of 8 one at a time (24 channels) and in pairs (32 channels, AVX2's forward_block_pair).
TEST(ConvReluMaxPool, ForwardHasTheBitsOfTheUnfusedOps) {
  for (int64_t C : {1, 3})
    for (auto [O, block] : {std::pair{32, 16}, std::pair{32, 8}, std::pair{24, 8}}) {
      SCOPED_TRACE("C " + std::to_string(C) + " O " + std::to_string(O) + " block " +
                   std::to_string(block));
      manual_seed(23);
      const Conv2dAttrs a = valid_3x3({4, C, 14, 13}, O, false);
      Tensor x = Tensor::randn(a.input_shape), w = ops::mul(Tensor::randn(a.weight_shape), 0.3);
      Tensor ref = to_plain(ops::relu(ops::max_pool2d(ops::conv2d(x, w), {2}))).contiguous();
      Tensor y = to_plain(cpu::conv_relu_max_pool(x, w, Tensor(), a, block)[0]).contiguous();
      ASSERT_EQ(y.shape(), ref.shape());
      EXPECT_EQ(std::memcmp(y.data<float>(), ref.data<float>(), sizeof(float) * size_t(y.numel())),
                0);
    }
}

// The fused backward against central differences of the fused forward's loss sum(y * dy) (both
// in float32, the loss summed in float64), over every weight and bias.
TEST(ConvReluMaxPool, BackwardMatchesFiniteDifferences) {
  for (int64_t C : {1, 3}) {
    SCOPED_TRACE("C " + std::to_string(C));
    manual_seed(22);
    const Conv2dAttrs a = valid_3x3({2, C, 7, 8}, 16, true);
    Tensor x = random_input(a.input_shape, DType::f32),
           w = random_input(a.weight_shape, DType::f32);
    Tensor b = random_input({16}, DType::f32);
    Tensor dy = random_input(cpu::conv_relu_max_pool_shape(a), DType::f32);
    const int block = cpu::preferred_channel_block(16);
    auto loss = [&](const Tensor& wv, const Tensor& bv) {
      Tensor y = to_plain(cpu::conv_relu_max_pool(x, wv, bv, a, block)[0]);
      return ops::sum(ops::mul(y.to(DType::f64), dy.to(DType::f64))).item();
    };
    std::vector<Tensor> f = cpu::conv_relu_max_pool(x, w, b, a, block);
    std::vector<Tensor> g = cpu::conv_relu_max_pool_backward(dy, x, f[1], a);
    const float eps = 5e-4f;  // small: the loss is piecewise linear (ReLU, the window's maximum)
    for (auto [param, grad] : {std::pair{w, g[0]}, std::pair{b, g[1]}}) {
      float* p = param.data<float>();
      const float* d = grad.data<float>();
      for (int64_t i = 0; i < param.numel(); ++i) {
        const float keep = p[i];
        p[i] = keep + eps;
        const double up = loss(w, b);
        p[i] = keep - eps;
        const double down = loss(w, b);
        p[i] = keep;
        const double fd = (up - down) / (2.0 * eps);
        EXPECT_NEAR(d[i], fd, 2e-3 * (1.0 + std::abs(fd))) << "element " << i;
      }
    }
  }
}

TEST(ConvReluMaxPool, OtherConvolutionsDoNotFitAndForeignWorkspacesAreRefused) {
  Conv2dAttrs a = valid_3x3({2, 3, 8, 8}, 16, false);
  EXPECT_TRUE(cpu::conv_relu_max_pool_fits(a, DType::f32));
  EXPECT_FALSE(cpu::conv_relu_max_pool_fits(a, DType::f64));
  Conv2dAttrs five = valid_3x3({2, 5, 8, 8}, 16, false);  // 5 input channels
  EXPECT_FALSE(cpu::conv_relu_max_pool_fits(five, DType::f32));
  Conv2dAttrs twelve = valid_3x3({2, 3, 8, 8}, 12, false);  // channels not a multiple of 8
  EXPECT_FALSE(cpu::conv_relu_max_pool_fits(twelve, DType::f32));
  Conv2dAttrs padded = a;
  padded.pad_begin = padded.pad_end = {1, 1};
  EXPECT_FALSE(cpu::conv_relu_max_pool_fits(padded, DType::f32));
  Tensor dy = Tensor::randn({2, 16, 3, 3}), x = Tensor::randn({2, 3, 8, 8});
  EXPECT_TRUE(throws_with(
      [&] {
        cpu::conv_relu_max_pool_backward(dy, x, Tensor::zeros({2, 16, 3, 3}, DType::u8), a);
      },
      "[conv2d_relu_max_pool_backward] the workspace is not conv2d_relu_max_pool's"));
}

}  // namespace
