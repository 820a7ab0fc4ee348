// The quantized linear kernels (src/backend/cpu/quant_*.cpp) on every instruction set this CPU
// runs, against a float64 product of x and the dequantized weight: decode shapes (1-8 rows) and
// prefill ones, odd row counts, one and two threads. The activations are quantized to int8 per
// block of 32, so the tolerance is that error's bound: sum_i |w_i| d_i / 2 (d_i the scale of
// x_i's block), plus float32 rounding.
#include <cmath>
#include <random>

#include "backend/cpu/quant_kernels.h"
#include "support/op_check.h"

using namespace zenith;
using namespace zenith::testing;
using cpu::QuantIsa;

namespace {

class ThreadsScope {
 public:
  explicit ThreadsScope(int n) : saved_(context::get_num_threads()) { context::set_num_threads(n); }
  ~ThreadsScope() { context::set_num_threads(saved_); }

 private:
  int saved_;
};

struct Shape3 {
  int64_t m, out, in;
};

// Fails naming format, ISA and the first output beyond its bound.
void check_linear(QuantIsa isa, QuantFormat f, Shape3 s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(size_t(s.m * s.in)), wf(size_t(s.out * s.in));
  for (float& v : x) v = dist(rng);
  for (float& v : wf) v = 0.05f * dist(rng);
  x[3] = 6.0f;  // an outlier: its block's int8 scale is coarse
  QuantizedWeight w =
      quantize_weight(Tensor::from_vector(wf, {s.out, s.in}), f);  // the weight under test
  Tensor deq = dequantize_weight(w);
  const float* dw = deq.data<float>();
  std::vector<float> y(size_t(s.m * s.out), NAN);
  cpu::quant_linear(isa, f, x.data(), s.m, s.in, w.blocks.data<uint8_t>(), s.out, y.data());
  for (int64_t r = 0; r < s.m; ++r) {
    std::vector<double> scale(size_t(s.in / 32));
    for (int64_t b = 0; b < s.in / 32; ++b) {
      double amax = 0;
      for (int i = 0; i < 32; ++i)
        amax = std::max(amax, double(std::fabs(x[r * s.in + 32 * b + i])));
      scale[b] = amax / 127;
    }
    for (int64_t o = 0; o < s.out; ++o) {
      double ref = 0, bound = 0, mag = 0;
      for (int64_t i = 0; i < s.in; ++i) {
        const double wv = dw[o * s.in + i], xv = x[r * s.in + i];
        ref += wv * xv, bound += std::fabs(wv) * scale[i / 32] / 2, mag += std::fabs(wv * xv);
      }
      const double err = std::fabs(double(y[r * s.out + o]) - ref);
      ASSERT_LE(err, bound * 1.01 + 1e-5 * mag + 1e-6)
          << quant_name(f) << " on " << cpu::quant_isa_name(isa) << ", [" << s.m << ", " << s.in
          << "] x [" << s.out << ", " << s.in << "]^T, row " << r << " output " << o;
    }
  }
}

std::vector<QuantIsa> isas() {
  std::vector<QuantIsa> out;
  for (QuantIsa isa : {QuantIsa::scalar, QuantIsa::avx2, QuantIsa::avx512_vnni})
    if (cpu::quant_isa_supported(isa)) out.push_back(isa);
  return out;
}

}  // namespace

TEST(QuantLinear, DecodeRowsOnEveryIsa) {
  uint32_t seed = 1;
  for (QuantIsa isa : isas())
    for (QuantFormat f :
         {QuantFormat::q8_0, QuantFormat::q4_0, QuantFormat::q4_k, QuantFormat::nf4})
      for (int64_t m : {1, 2, 3, 5, 8}) check_linear(isa, f, {m, 37, 512}, seed++);
  // Odd counts of blocks of 32 (the kernels take two blocks a step, then a last one).
  for (QuantIsa isa : isas())
    for (QuantFormat f : {QuantFormat::q8_0, QuantFormat::q4_0})
      for (int64_t in : {32, 96, 224})
        for (int64_t m : {1, 4}) check_linear(isa, f, {m, 7, in}, seed++);
}

// Large enough to be split over the pool (more than 64 KiB of blocks), odd counts of rows.
TEST(QuantLinear, PrefillThreaded) {
  for (int threads : {1, 2}) {
    ThreadsScope scope(threads);
    for (QuantFormat f :
         {QuantFormat::q8_0, QuantFormat::q4_0, QuantFormat::q4_k, QuantFormat::nf4})
      check_linear(cpu::quant_isa(), f, {13, 301, 768}, 40 + threads);
  }
}

// The SIMD paths do the scalar path's integer arithmetic: equal up to float32 summation order.
TEST(QuantLinear, SimdMatchesScalar) {
  const int64_t m = 3, in = 256, out = 9;
  std::vector<float> x(size_t(m * in));
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (float& v : x) v = dist(rng);
  for (QuantFormat f :
       {QuantFormat::q8_0, QuantFormat::q4_0, QuantFormat::q4_k, QuantFormat::nf4}) {
    QuantizedWeight w = quantize_weight(Tensor::randn({out, in}), f);
    std::vector<float> ref(size_t(m * out)), y(size_t(m * out));
    cpu::quant_linear(QuantIsa::scalar, f, x.data(), m, in, w.blocks.data<uint8_t>(), out,
                      ref.data());
    for (QuantIsa isa : isas()) {
      cpu::quant_linear(isa, f, x.data(), m, in, w.blocks.data<uint8_t>(), out, y.data());
      for (int64_t i = 0; i < m * out; ++i)
        ASSERT_NEAR(y[i], ref[i], 1e-4 * (1 + std::fabs(ref[i])))
            << quant_name(f) << " on " << cpu::quant_isa_name(isa);
    }
  }
  EXPECT_STREQ(cpu::quant_isa_name(cpu::quant_isa()),
               cpu::quant_isa_supported(QuantIsa::avx512_vnni) ? "avx512_vnni" : "avx2");
}
