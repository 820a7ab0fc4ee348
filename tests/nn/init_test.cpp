// Initialisers: PyTorch's default bounds and moments, checked on large draws.
#include <cmath>

#include "support/op_check.h"
#include "support/peak_rss.h"

using namespace zenith;
using namespace zenith::testing;

namespace {

struct Moments {
  double mean = 0, std = 0, min = 1e300, max = -1e300;
};

Moments moments(const Tensor& t) {
  auto v = t.to_double_vector();
  Moments m;
  for (double e : v) {
    m.mean += e;
    m.min = std::min(m.min, e);
    m.max = std::max(m.max, e);
  }
  m.mean /= double(v.size());
  for (double e : v) m.std += (e - m.mean) * (e - m.mean);
  m.std = std::sqrt(m.std / double(v.size()));
  return m;
}

Tensor param(const nn::CellPtr& c, const std::string& name) { return c->state_dict().at(name); }

// Uniform(-b, b): within bounds, reaching near them, mean ~0, std b/sqrt(3).
void expect_uniform(const Tensor& t, double bound) {
  Moments m = moments(t);
  double n = double(t.numel());
  EXPECT_LE(m.max, bound);
  EXPECT_GE(m.min, -bound);
  EXPECT_GT(m.max, bound * 0.99);
  EXPECT_LT(m.min, -bound * 0.99);
  EXPECT_NEAR(m.mean, 0.0, 5 * bound / std::sqrt(3 * n));
  EXPECT_NEAR(m.std, bound / std::sqrt(3.0), 0.01 * bound);
}

}  // namespace

TEST(Init, DenseMatchesPyTorchLinear) {
  manual_seed(10);
  auto d = nn::Dense(1000, 400);
  expect_uniform(param(d, "weight"), 1.0 / std::sqrt(1000.0));  // kaiming_uniform(a=sqrt(5))
  expect_uniform(nn::Dense(100, 4000)->state_dict().at("bias"), 1.0 / std::sqrt(100.0));
}

TEST(Init, Conv2dMatchesPyTorch) {
  manual_seed(11);
  auto c = nn::Conv2d(64, 128, 3, 1, "same", 0, 1, 1, /*has_bias=*/true);
  EXPECT_EQ(nn::init::fan_in(param(c, "weight")), 576);
  EXPECT_EQ(nn::init::fan_out(param(c, "weight")), 1152);
  expect_uniform(param(c, "weight"), 1.0 / std::sqrt(576.0));
  Moments b = moments(param(c, "bias"));
  EXPECT_LE(b.max, 1.0 / std::sqrt(576.0));
  EXPECT_GE(b.min, -1.0 / std::sqrt(576.0));
  EXPECT_EQ(nn::Conv2d(3, 8, 3)->state_dict().count("bias"), 0u);  // MindSpore has_bias=false
}

TEST(Init, EmbeddingIsStandardNormal) {
  manual_seed(12);
  Moments m = moments(param(nn::Embedding(1000, 200), "weight"));
  EXPECT_NEAR(m.mean, 0.0, 0.01);
  EXPECT_NEAR(m.std, 1.0, 0.01);
}

TEST(Init, NormsStartAtOneAndZero) {
  auto bn = nn::BatchNorm2d(5);
  EXPECT_EQ(param(bn, "weight").to_double_vector(), std::vector<double>(5, 1.0));
  EXPECT_EQ(param(bn, "bias").to_double_vector(), std::vector<double>(5, 0.0));
  EXPECT_EQ(param(bn, "running_mean").to_double_vector(), std::vector<double>(5, 0.0));
  EXPECT_EQ(param(bn, "running_var").to_double_vector(), std::vector<double>(5, 1.0));
  auto ln = nn::LayerNorm({2, 3});
  EXPECT_EQ(param(ln, "weight").shape(), (Shape{2, 3}));
  EXPECT_EQ(param(ln, "bias").to_double_vector(), std::vector<double>(6, 0.0));
  EXPECT_EQ(param(nn::RMSNorm(4), "weight").to_double_vector(), std::vector<double>(4, 1.0));
}

TEST(Init, KaimingNormalAndXavier) {
  manual_seed(13);
  Tensor w = Tensor::empty({256, 128, 3, 3});
  nn::init::kaiming_normal_(w);
  Moments m = moments(w);
  EXPECT_NEAR(m.mean, 0.0, 0.001);
  EXPECT_NEAR(m.std, std::sqrt(2.0 / (256 * 9)), 0.002 * m.std * 10);
  Tensor x = Tensor::empty({300, 500});
  nn::init::xavier_uniform_(x);
  expect_uniform(x, std::sqrt(6.0 / 800.0));
  nn::init::constant_(x, 0.25);
  EXPECT_EQ(moments(x).min, 0.25);
  EXPECT_TRUE(throws_with(
      [] {
        Tensor v = Tensor::empty({5});
        nn::init::kaiming_uniform_(v);
      },
      "[fan_in] fan in/out needs a tensor with at least 2 dims"));
}

TEST(Init, SeedMakesInitDeterministic) {
  manual_seed(42);
  auto a = nn::Dense(5, 5);
  manual_seed(42);
  auto b = nn::Dense(5, 5);
  EXPECT_TRUE(all_close(param(a, "weight"), param(b, "weight"), 0, 0));
}

// A weight above one chunk (2^20 elements) is drawn chunk by chunk: the same values as one
// whole draw, in any dtype, and the float64 draws never exist whole (a 32000 x 768 embedding
// would otherwise add 3 x 200 MB to an LLM's peak memory).
TEST(Init, LargeWeightsDrawnInChunksEqualOneDraw) {
  const Shape shape = {3, 1 << 19};  // 1.5 chunks
  for (DType dtype : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dtype));
    manual_seed(7);
    Tensor w = Tensor::empty(shape, dtype);
    nn::init::normal_(w, 0.5, 0.02);
    manual_seed(7);
    Tensor want = ops::add(ops::mul(Tensor::randn(shape, DType::f64), 0.02), 0.5).to(dtype);
    EXPECT_TRUE(all_close(w, want, 0, 0));
    manual_seed(7);
    nn::init::uniform_(w, -0.1, 0.2);
    manual_seed(7);
    EXPECT_TRUE(all_close(w, Tensor::uniform(shape, -0.1, 0.2, dtype), 0, 0));
  }
  Tensor big = Tensor::zeros({16, 1 << 20});  // 64 MB float32, resident; one float64 draw: 128 MB
  const int64_t growth = peak_rss_growth([&] { nn::init::normal_(big, 0.0, 1.0); });
  ASSERT_GE(growth, 0) << "cannot reset the peak RSS through /proc/self/clear_refs";
  EXPECT_LT(growth, int64_t(48) << 20) << "normal_ grew the peak RSS by " << growth;
}
