#include <map>

#include "backend/cpu/onednn_layout.h"
#include "core/dispatch.h"
#include "support/op_check.h"

using namespace zenith;
using namespace zenith::testing;

namespace {

struct ConvCase {
  const char* name;
  Shape x, w;
  ops::Conv2dOptions options;
  bool bias = true;
  bool noncontiguous = false;
};

ops::Conv2dOptions opts(std::vector<int64_t> stride, std::vector<int64_t> padding,
                        std::string mode = "explicit", std::vector<int64_t> dilation = {1, 1},
                        int64_t groups = 1) {
  ops::Conv2dOptions o;
  o.stride = stride;
  o.padding = padding;
  o.padding_mode = mode;
  o.dilation = dilation;
  o.groups = groups;
  return o;
}

// Small shapes: gradcheck perturbs every element.
const std::vector<ConvCase> kCases = {
    {"basic", {2, 3, 6, 6}, {4, 3, 3, 3}, opts({1, 1}, {0, 0})},
    {"no_bias", {2, 3, 6, 6}, {4, 3, 3, 3}, opts({1, 1}, {0, 0}), false},
    {"stride2_pad1", {2, 3, 7, 7}, {4, 3, 3, 3}, opts({2, 2}, {1, 1})},
    {"asymmetric_stride_pad", {1, 2, 7, 6}, {3, 2, 3, 2}, opts({2, 1}, {1, 0})},
    {"pad4", {1, 2, 5, 5}, {3, 2, 3, 3}, opts({1, 1}, {0, 1, 2, 1})},
    {"same_odd", {2, 3, 5, 5}, {4, 3, 3, 3}, opts({1, 1}, {}, "same")},
    {"same_even_kernel", {1, 2, 6, 6}, {3, 2, 4, 4}, opts({1, 1}, {}, "same")},
    {"same_stride2", {1, 2, 7, 7}, {3, 2, 3, 3}, opts({2, 2}, {}, "same")},
    {"valid", {1, 2, 6, 5}, {3, 2, 3, 3}, opts({1, 1}, {5, 5}, "valid")},
    {"dilation2", {1, 2, 8, 8}, {3, 2, 3, 3}, opts({1, 1}, {2, 2}, "explicit", {2, 2})},
    {"groups2", {2, 4, 5, 5}, {6, 2, 3, 3}, opts({1, 1}, {1, 1}, "explicit", {1, 1}, 2)},
    {"depthwise", {1, 4, 5, 5}, {4, 1, 3, 3}, opts({1, 1}, {1, 1}, "explicit", {1, 1}, 4), false},
    {"pointwise", {2, 4, 4, 4}, {5, 4, 1, 1}, opts({1, 1}, {0, 0})},
    {"noncontiguous", {2, 3, 6, 6}, {4, 3, 3, 3}, opts({1, 1}, {1, 1}), true, true},
};

OpFn conv_fn(const ops::Conv2dOptions& o) {
  return [o](const std::vector<Tensor>& x) { return ops::conv2d(x[0], x[1], x[2], o); };
}

std::vector<Tensor> inputs_for(const ConvCase& c) {
  return {random_input(c.x, DType::f64, c.noncontiguous),
          random_input(c.w, DType::f64, c.noncontiguous),
          c.bias ? random_input({c.w[0]}) : Tensor()};
}

}  // namespace

TEST(Conv2d, ForwardMatchesFloat64) {
  for (auto& c : kCases) {
    SCOPED_TRACE(c.name);
    EXPECT_TRUE(forward_matches_f64(conv_fn(c.options), inputs_for(c)));
  }
}

TEST(Conv2d, Gradcheck) {
  for (auto& c : kCases) {
    SCOPED_TRACE(c.name);
    auto in = inputs_for(c);
    for (auto& t : in)
      if (t.defined()) t.requires_grad_();
    EXPECT_TRUE(gradcheck(conv_fn(c.options), in));
  }
}

TEST(Conv2d, Float32BackwardMatchesFloat64) {
  for (auto& c : kCases) {
    SCOPED_TRACE(c.name);
    auto in = inputs_for(c);
    for (auto& t : in)
      if (t.defined()) t.requires_grad_();
    EXPECT_TRUE(backward_matches_f64(conv_fn(c.options), in));
  }
}

TEST(Conv2d, OnlyWeightGradient) {
  // The first layer's input needs no gradient: only conv2d_backward_weights runs, seen by a
  // dispatch observer; the data gradient's kernel never does.
  Tensor x = random_input({2, 1, 6, 6}, DType::f32);
  Tensor w = random_input({16, 1, 3, 3}, DType::f32).requires_grad_();
  std::map<OpId, int> seen;
  auto observe = [](void* user, const dispatch::OpEvent& e) {
    ++(*static_cast<std::map<OpId, int>*>(user))[e.op];
  };
  const int id = dispatch::add_observer(observe, &seen);
  ops::sum(ops::conv2d(x, w)).backward();
  dispatch::remove_observer(id);
  EXPECT_EQ(seen[OpId::conv2d_backward_weights], 1);
  EXPECT_EQ(seen[OpId::conv2d_backward_data], 0);
  EXPECT_TRUE(w.grad().defined());
  EXPECT_FALSE(x.grad().defined());
  // With the input needing a gradient too, both run (the observer sees what it should).
  seen.clear();
  x.requires_grad_();
  const int again = dispatch::add_observer(observe, &seen);
  ops::sum(ops::conv2d(x, w)).backward();
  dispatch::remove_observer(again);
  EXPECT_EQ(seen[OpId::conv2d_backward_weights], 1);
  EXPECT_EQ(seen[OpId::conv2d_backward_data], 1);
}

TEST(Conv2d, OutputShapes) {
  auto shape_of = [](Shape x, Shape w, ops::Conv2dOptions o) {
    return ops::conv2d(Tensor::zeros(x), Tensor::zeros(w), Tensor(), o).shape();
  };
  EXPECT_EQ(shape_of({1, 3, 32, 32}, {8, 3, 3, 3}, opts({1, 1}, {}, "same")),
            (Shape{1, 8, 32, 32}));
  EXPECT_EQ(shape_of({1, 3, 32, 32}, {8, 3, 3, 3}, opts({2, 2}, {}, "same")),
            (Shape{1, 8, 16, 16}));
  EXPECT_EQ(shape_of({1, 3, 32, 32}, {8, 3, 3, 3}, opts({1, 1}, {}, "valid")),
            (Shape{1, 8, 30, 30}));
  EXPECT_EQ(shape_of({1, 3, 32, 32}, {8, 3, 7, 7}, opts({2, 2}, {3, 3})), (Shape{1, 8, 16, 16}));
  EXPECT_EQ(shape_of({1, 3, 9, 9}, {8, 3, 3, 3}, opts({1, 1}, {0, 0}, "explicit", {3, 3})),
            (Shape{1, 8, 3, 3}));
}

TEST(Conv2d, MatchesHandComputedValues) {
  // 1x1x3x3 input 0..8, 2x2 kernel of ones, bias 0.5 -> sums of 2x2 windows + 0.5.
  std::vector<float> xs(9);
  for (int i = 0; i < 9; ++i) xs[size_t(i)] = float(i);
  Tensor x = Tensor::from_vector(xs, {1, 1, 3, 3});
  Tensor y = ops::conv2d(x, Tensor::ones({1, 1, 2, 2}), Tensor::full({1}, 0.5));
  EXPECT_EQ(y.to_float_vector(), (std::vector<float>{8.5f, 12.5f, 20.5f, 24.5f}));
}

TEST(Conv2d, Float32OutputIsPlainWhenLayoutsAreOff) {
  cpu::set_keep_layout(false);
  Tensor y = ops::conv2d(Tensor::randn({2, 16, 8, 8}), Tensor::randn({32, 16, 3, 3}));
  cpu::set_keep_layout(true);
  EXPECT_FALSE(y.has_layout());
  EXPECT_TRUE(y.is_contiguous());
}

TEST(Conv2d, LayoutOutputReadsLikePlain) {
  Tensor x = Tensor::randn({2, 16, 8, 8}), w = Tensor::randn({32, 16, 3, 3});
  Tensor kept = ops::conv2d(x, w);
  EXPECT_TRUE(kept.has_layout());  // 32 channels: oneDNN's blocked format, no padding
  cpu::set_keep_layout(false);
  Tensor plain = ops::conv2d(x, w);
  cpu::set_keep_layout(true);
  EXPECT_TRUE(all_close(kept, plain, 0, 0));  // to_double_vector goes through to_plain
  EXPECT_TRUE(all_close(kept.contiguous(), plain, 0, 0));
  EXPECT_TRUE(all_close(kept.reshape({2, -1}), plain.reshape({2, -1}), 0, 0));
}

TEST(Conv2d, Errors) {
  Tensor x = Tensor::zeros({64, 3, 32, 32}), w = Tensor::zeros({32, 1, 3, 3});
  EXPECT_TRUE(throws_with([&] { ops::conv2d(x, w); },
                          "[conv2d] input has 3 channels, weight expects 1 (input [64, 3, 32, 32], "
                          "weight [32, 1, 3, 3])"));
  EXPECT_TRUE(throws_with(
      [&] {
        ops::conv2d(Tensor::zeros({3, 32, 32}), w);
      },
      "[conv2d] expected a 4-d input [N, C, H, W], got [3, 32, 32]"));
  EXPECT_TRUE(throws_with(
      [&] {
        ops::conv2d(Tensor::zeros({1, 4, 8, 8}), Tensor::zeros({6, 2, 3, 3}), Tensor(),
                    opts({1, 1}, {0, 0}, "explicit", {1, 1}, 3));
      },
      "[conv2d] input has 4 channels, weight expects 6"));
  EXPECT_TRUE(throws_with(
      [&] {
        ops::conv2d(Tensor::zeros({1, 3, 2, 2}), Tensor::zeros({4, 3, 3, 3}));
      },
      "is smaller than the kernel"));
  EXPECT_TRUE(throws_with(
      [&] {
        ops::conv2d(x, Tensor::zeros({8, 3, 3, 3}), Tensor(), opts({1, 1}, {}, "full"));
      },
      "[conv2d] unknown padding_mode 'full'"));
  EXPECT_TRUE(throws_with(
      [&] {
        ops::conv2d(x, Tensor::zeros({8, 3, 3, 3}), Tensor(), opts({0, 1}, {0, 0}));
      },
      "[conv2d] stride must be >= 1"));
  EXPECT_TRUE(throws_with(
      [&] {
        ops::conv2d(x, Tensor::zeros({8, 3, 3, 3}), Tensor::zeros({4}));
      },
      "[conv2d] expected bias [8], got [4]"));
  EXPECT_TRUE(throws_with(
      [&] {
        ops::conv2d(x, Tensor::zeros({8, 3, 3, 3}, DType::f64));
      },
      "[conv2d] input is float32 but weight is float64"));
}

TEST(Conv2d, WinogradMatchesFloat64) {
  // 64 -> 64 channels, 3x3, batch 8: "auto" picks Winograd here; check it (and forced
  // Winograd) against the float64 reference, forward and backward.
  std::vector<Tensor> in = {random_input({8, 64, 6, 6}),
                            random_input({64, 64, 3, 3}, DType::f64, false, -0.1, 0.1),
                            random_input({64})};
  OpFn f = conv_fn(opts({1, 1}, {1, 1}));
  for (const char* algo : {"auto", "winograd"}) {
    SCOPED_TRACE(algo);
    cpu::set_conv_algorithm(algo);
    EXPECT_TRUE(forward_matches_f64(f, in, 1e-4, 1e-4));
    std::vector<Tensor> g = in;
    for (auto& t : g) t = t.detach().clone().requires_grad_();
    EXPECT_TRUE(backward_matches_f64(f, g, 1e-3, 1e-3));
  }
  cpu::set_conv_algorithm("auto");
  EXPECT_TRUE(throws_with([] { cpu::set_conv_algorithm("fft"); }, "unknown algorithm 'fft'"));
}

TEST(Conv2d, FewChannelWeightGradientMatchesFloat64) {
  // zenith's AVX2 weight gradient for < 8 input channels ("auto" uses it where oneDNN lacks
  // AVX-512) against the float64 reference (itself checked by finite differences above): one
  // channel (SeedCNN fmnist), three with stride and padding (27 taps: three chunks of 9), a 5x5
  // dilated kernel, no bias; dy blocked (layouts kept) and plain.
  const std::vector<ConvCase> cases = {
      {"fmnist", {4, 1, 10, 10}, {16, 1, 3, 3}, opts({1, 1}, {0, 0})},
      {"rgb_stride2_pad1", {2, 3, 9, 8}, {8, 3, 3, 3}, opts({2, 2}, {1, 1})},
      {"asymmetric_pad", {2, 2, 7, 6}, {8, 2, 3, 2}, opts({2, 1}, {0, 1, 2, 1})},
      {"dilated_5x5", {2, 1, 12, 12}, {24, 1, 5, 5}, opts({1, 1}, {2, 2}, "explicit", {2, 2})},
      {"no_bias", {3, 1, 8, 8}, {32, 1, 3, 3}, opts({1, 1}, {0, 0}), false},
  };
  for (const char* mode : {"on", "off"})
    for (bool keep : {true, false})
      for (auto& c : cases) {
        SCOPED_TRACE(std::string(c.name) + " mode " + mode + (keep ? " blocked" : " plain"));
        cpu::set_avx2_fast_paths(mode);
        cpu::set_keep_layout(keep);
        auto in = inputs_for(c);
        for (size_t i = 1; i < in.size(); ++i)
          if (in[i].defined()) in[i].requires_grad_();  // the weights: x needs no gradient
        EXPECT_TRUE(backward_matches_f64(conv_fn(c.options), in, 1e-4, 1e-4));
      }
  cpu::set_avx2_fast_paths("auto");
  cpu::set_keep_layout(true);
  EXPECT_TRUE(
      throws_with([] { cpu::set_avx2_fast_paths("fast"); }, "unknown AVX2 fast-path mode 'fast'"));
}

TEST(Conv2d, BlockedWeightGradientMatchesFloat64) {
  // zenith's AVX2 weight gradient of 3-wide stride-1 convs on nChw8c ("auto" uses it where
  // oneDNN lacks AVX-512) against the float64 reference: SeedCNN's second conv's shape at a
  // smaller batch (two input-channel blocks), padding on every side, a 5x3 and a 1x3 kernel, one
  // image, no bias, the batch in pieces and an image in bands; dy and x blocked (layouts kept)
  // and plain; x's gradient too (oneDNN's), which must be unaffected.
  const std::vector<ConvCase> cases = {
      {"seedcnn_conv2", {3, 16, 9, 9}, {16, 16, 3, 3}, opts({1, 1}, {0, 0}), false},
      {"pad1_bias", {2, 8, 7, 6}, {24, 8, 3, 3}, opts({1, 1}, {1, 1})},
      {"asymmetric_pad_5x3", {1, 8, 9, 8}, {8, 8, 5, 3}, opts({1, 1}, {0, 1, 2, 1})},
      {"kernel_1x3", {2, 8, 5, 7}, {16, 8, 1, 3}, opts({1, 1}, {0, 0})},
      {"same", {5, 24, 6, 5}, {8, 24, 3, 3}, opts({1, 1}, {}, "same"), false},
      // Pieces of the batch the kernel sweeps its tasks over: 2 + 2 + 1 images of 95 KB, and
      // one 300 KB image in bands of 44 and 24 rows (tolerance below).
      {"pieces_of_two_images", {5, 8, 40, 40}, {8, 8, 3, 3}, opts({1, 1}, {0, 0})},
      {"bands_of_rows", {1, 8, 70, 70}, {8, 8, 3, 3}, opts({1, 1}, {0, 0}), false},
  };
  for (const char* mode : {"on", "off"})
    for (bool keep : {true, false})
      for (auto& c : cases) {
        SCOPED_TRACE(std::string(c.name) + " mode " + mode + (keep ? " blocked" : " plain"));
        cpu::set_avx2_fast_paths(mode);
        cpu::set_keep_layout(keep);
        auto in = inputs_for(c);
        for (auto& t : in)
          if (t.defined()) t.requires_grad_();
        // The two large cases sum 4,600-7,200 float32 products per weight, gradients up to ~100:
        // both kernels' rounding reaches 1-3e-4 absolute there (measured, 3 seeds: zenith's
        // 1.2-2.8e-4 max, oneDNN's 1.2-1.7e-4), so 1e-3 absolute; 1e-4 for the small ones.
        const double atol = c.x[2] >= 40 ? 1e-3 : 1e-4;
        EXPECT_TRUE(backward_matches_f64(conv_fn(c.options), in, 1e-4, atol));
      }
  cpu::set_avx2_fast_paths("auto");
  cpu::set_keep_layout(true);
}

TEST(Conv2d, GroupedConvOnBlockedInputMatchesPlain) {
  Tensor x = Tensor::randn({2, 8, 9, 9}), w1 = Tensor::randn({32, 8, 3, 3});
  Tensor dw = Tensor::randn({32, 1, 3, 3}), gw = Tensor::randn({32, 8, 3, 3});
  std::vector<Tensor> outs;
  for (bool keep : {true, false}) {
    cpu::set_keep_layout(keep);
    Tensor h = ops::conv2d(x, w1);
    EXPECT_EQ(h.has_layout(), keep);
    Tensor depthwise = ops::conv2d(h, dw, Tensor(), opts({1, 1}, {1, 1}, "explicit", {1, 1}, 32));
    Tensor grouped = ops::conv2d(h, gw, Tensor(), opts({2, 2}, {1, 1}, "explicit", {1, 1}, 4));
    outs.push_back(depthwise.contiguous());
    outs.push_back(grouped.contiguous());
  }
  cpu::set_keep_layout(true);
  EXPECT_TRUE(all_close(outs[0], outs[2], 1e-5, 1e-4));
  EXPECT_TRUE(all_close(outs[1], outs[3], 1e-5, 1e-4));
}

// conv2d's gradients are conv2d ops (a transposed convolution and a convolution by the output
// gradient), so they are differentiated again.
TEST(Conv2d, SecondDerivatives) {
  Tensor x = random_input({1, 2, 5, 6}, DType::f64).requires_grad_();
  Tensor w = random_input({4, 1, 3, 2}, DType::f64).requires_grad_();
  Tensor b = random_input({4}, DType::f64).requires_grad_();
  ops::Conv2dOptions o{.stride = {2, 1}, .padding = {1, 0, 0, 1}, .groups = 2};
  EXPECT_TRUE(gradgradcheck(
      [o](auto& in) { return ops::tanh(ops::conv2d(in[0], in[1], in[2], o)); }, {x, w, b}));
}
