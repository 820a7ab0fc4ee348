// bfloat16 x bfloat16 GEMM in bfloat16 arithmetic (src/backend/cpu/gemm_bf16.cpp) against the
// float64 product of the same bfloat16 values: equal up to float32 accumulation, for row counts
// that change from call to call (M is a runtime dim), transposed operands, row strides and
// beta 1; and where it declines (alpha != 1, a float32 operand).
#include <random>

#include "backend/cpu/gemm.h"
#include "support/op_check.h"
#include "zenith/cpu_features.h"

using namespace zenith;
using namespace zenith::testing;

namespace {

struct Case {
  bool ta, tb;
  int64_t m, n, k;
  float beta;
};

std::vector<uint16_t> random_bf16(int64_t count, std::mt19937& rng) {
  std::normal_distribution<float> d;
  std::vector<uint16_t> out(static_cast<size_t>(count));
  for (auto& v : out) v = float_to_bf16(d(rng));
  return out;
}

}  // namespace

TEST(GemmBf16, EqualsTheFloat64ProductOfTheBfloat16Values) {
  if (!bf16_arithmetic()) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  std::mt19937 rng(3);
  for (Case c : {Case{false, true, 300, 288, 288, 0}, Case{false, true, 131, 1000, 288, 1},
                 Case{false, false, 77, 40, 700, 0}, Case{true, false, 48, 33, 129, 0},
                 Case{true, true, 5, 17, 64, 1}, Case{false, true, 301, 288, 288, 1}}) {
    SCOPED_TRACE(std::to_string(c.m) + "x" + std::to_string(c.n) + "x" + std::to_string(c.k) +
                 (c.ta ? " ta" : "") + (c.tb ? " tb" : ""));
    // Row strides 3 past the stored rows' lengths.
    const int64_t lda = (c.ta ? c.m : c.k) + 3, ldb = (c.tb ? c.k : c.n) + 3, ldc = c.n + 3;
    const auto a = random_bf16((c.ta ? c.k : c.m) * lda, rng);
    const auto b = random_bf16((c.tb ? c.n : c.k) * ldb, rng);
    std::vector<float> out(size_t(c.m * ldc), 0.5f);
    ASSERT_TRUE(cpu::gemm_bf16(c.ta, c.tb, c.m, c.n, c.k, 1.f, a.data(), DType::bf16, lda, b.data(),
                               DType::bf16, ldb, c.beta, out.data(), ldc));
    double worst = 0;
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < c.n; ++j) {
        double ref = c.beta * 0.5, scale = 0;
        for (int64_t e = 0; e < c.k; ++e) {
          const double x = bf16_to_float(a[size_t(c.ta ? e * lda + i : i * lda + e)]);
          const double y = bf16_to_float(b[size_t(c.tb ? j * ldb + e : e * ldb + j)]);
          ref += x * y;
          scale += std::abs(x * y);
        }
        worst = std::max(worst, std::abs(out[size_t(i * ldc + j)] - ref) / (scale + 1));
      }
    EXPECT_LT(worst, 1e-6);  // float32 sums of exact products
  }
}

TEST(GemmBf16, DeclinesWhatItDoesNotCompute) {
  std::vector<uint16_t> a(64, float_to_bf16(1.f)), b(64, float_to_bf16(2.f));
  std::vector<float> f(64, 1.f), c(64);
  EXPECT_FALSE(cpu::gemm_bf16(false, false, 8, 8, 8, 2.f, a.data(), DType::bf16, 8, b.data(),
                              DType::bf16, 8, 0.f, c.data(), 8));
  EXPECT_FALSE(cpu::gemm_bf16(false, false, 8, 8, 8, 1.f, f.data(), DType::f32, 8, b.data(),
                              DType::bf16, 8, 0.f, c.data(), 8));
}

// ZENITH_BF16_COMPUTE=0 (what an AVX2-only CPU gets): bf16 x bf16 products decline bfloat16
// arithmetic and gemm_lowp computes them in float32, the same values up to the order of the
// sums. bf16_arithmetic() is read once per process, so the check runs in a fresh child.
bool float32_path_when_off() {
  setenv("ZENITH_BF16_COMPUTE", "0", 1);
  std::mt19937 rng(5);
  const int64_t m = 64, n = 48, k = 96;
  const auto a = random_bf16(m * k, rng), b = random_bf16(n * k, rng);
  std::vector<float> c(size_t(m * n));
  bool ok = !bf16_arithmetic() && !cpu::gemm_bf16(false, true, m, n, k, 1.f, a.data(), DType::bf16,
                                                  k, b.data(), DType::bf16, k, 0.f, c.data(), n);
  cpu::gemm_lowp(false, true, m, n, k, 1.f, a.data(), DType::bf16, k, b.data(), DType::bf16, k, 0.f,
                 c.data(), n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double ref = 0, scale = 0;
      for (int64_t e = 0; e < k; ++e) {
        const double p =
            double(bf16_to_float(a[size_t(i * k + e)])) * bf16_to_float(b[size_t(j * k + e)]);
        ref += p;
        scale += std::abs(p);
      }
      ok = ok && std::abs(c[size_t(i * n + j)] - ref) <= 1e-6 * (scale + 1);
    }
  return ok;
}

TEST(GemmBf16, OffTheFloat32PathComputesTheSameProduct) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::exit(float32_path_when_off() ? 0 : 1), ::testing::ExitedWithCode(0), "");
}

// gemm_bf16_biased (a float32 result plus a float32 bias row, what linear gives for bfloat16 x
// and weight with a float32 bias) and gemm_bf16_rounded (the bfloat16 result of two bfloat16
// operands) against the float64 product: the first within float32 accumulation; the second the
// same sums rounded once to bfloat16 (8 significant bits), so within half a step, 2^-8 relative,
// more.
TEST(GemmBf16, BiasedAndRoundedResultsEqualTheFloat64Product) {
  if (!bf16_arithmetic()) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  std::mt19937 rng(7);
  for (Case c : {Case{false, true, 300, 288, 288, 0}, Case{false, false, 77, 40, 700, 0},
                 Case{true, false, 48, 33, 129, 0}}) {
    SCOPED_TRACE(std::to_string(c.m) + "x" + std::to_string(c.n) + "x" + std::to_string(c.k) +
                 (c.ta ? " ta" : "") + (c.tb ? " tb" : ""));
    const int64_t lda = (c.ta ? c.m : c.k) + 3, ldb = (c.tb ? c.k : c.n) + 3, ldc = c.n + 3;
    const auto a = random_bf16((c.ta ? c.k : c.m) * lda, rng);
    const auto b = random_bf16((c.tb ? c.n : c.k) * ldb, rng);
    std::vector<float> bias(size_t(c.n));
    std::normal_distribution<float> d;
    for (float& v : bias) v = d(rng);
    std::vector<float> out(size_t(c.m * ldc));
    std::vector<uint16_t> rounded(size_t(c.m * ldc));
    ASSERT_TRUE(cpu::gemm_bf16_biased(c.ta, c.tb, c.m, c.n, c.k, a.data(), lda, b.data(), ldb,
                                      bias.data(), out.data(), ldc));
    ASSERT_TRUE(cpu::gemm_bf16_rounded(c.ta, c.tb, c.m, c.n, c.k, a.data(), lda, b.data(), ldb,
                                       rounded.data(), ldc));
    double worst_biased = 0, worst_rounded = 0;
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < c.n; ++j) {
        double ref = 0, scale = 0;
        for (int64_t e = 0; e < c.k; ++e) {
          const double x = bf16_to_float(a[size_t(c.ta ? e * lda + i : i * lda + e)]);
          const double y = bf16_to_float(b[size_t(c.tb ? j * ldb + e : e * ldb + j)]);
          ref += x * y;
          scale += std::abs(x * y);
        }
        const double biased = ref + bias[size_t(j)];
        worst_biased = std::max(worst_biased, std::abs(out[size_t(i * ldc + j)] - biased) /
                                                  (scale + std::abs(bias[size_t(j)]) + 1));
        const double got = bf16_to_float(rounded[size_t(i * ldc + j)]);
        worst_rounded =
            std::max(worst_rounded,
                     std::abs(got - ref) / (std::ldexp(std::abs(ref), -8) + 1e-6 * (scale + 1)));
      }
    EXPECT_LT(worst_biased, 1e-6);  // float32 sums of exact products, plus the bias
    EXPECT_LE(worst_rounded, 1.0);  // those sums rounded once to bfloat16
  }
}
