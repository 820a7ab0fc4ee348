// The repacked q4_0, q8_0 and q4_K kernels (src/backend/cpu/quant_repack.*): the layout holds every
// element and scale of the GGML blocks; the kernels on it match a float64 product with the
// dequantized weight within the activations' int8 error; AVX2 and AVX-512 VNNI give the same bits;
// a row's result does not depend on the rows beside it or on the threads; at inference the op
// takes the repacked path once per weight, the plain one for a row count that is no multiple of 8.
#include "backend/cpu/quant_repack.h"

#include <cmath>
#include <cstring>
#include <random>

#include "core/quant_x8.h"
#include "support/op_check.h"

using namespace zenith;
using cpu::QuantIsa;

namespace {

class ThreadsScope {
 public:
  explicit ThreadsScope(int n) : saved_(context::get_num_threads()) { context::set_num_threads(n); }
  ~ThreadsScope() { context::set_num_threads(saved_); }

 private:
  int saved_;
};

// The ISAs this CPU runs that take format f's repacked path.
std::vector<QuantIsa> x8_isas(QuantFormat f) {
  std::vector<QuantIsa> out;
  for (QuantIsa isa : {QuantIsa::avx2, QuantIsa::avx512_vnni})
    if (cpu::quant_isa_supported(isa) && cpu::x8_applies(isa, f, 8)) out.push_back(isa);
  return out;
}

constexpr QuantFormat kFormats[] = {QuantFormat::q4_0, QuantFormat::q8_0, QuantFormat::q4_k};

std::vector<float> normal(size_t n, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

struct Case {
  QuantFormat f;
  int64_t m, out, in;
  std::vector<float> x;
  QuantizedWeight w;
  std::vector<uint8_t> packed;
};

// q4_K's rows: `in` rounded up to its super-block of 256.
Case make_case(QuantFormat f, int64_t m, int64_t out, int64_t in, uint32_t seed) {
  if (f == QuantFormat::q4_k) in = (in + 255) / 256 * 256;
  Case c{f, m, out, in, normal(size_t(m * in), 1.0f, seed), {}, {}};
  c.x[1] = 6.0f;  // an outlier: its block's int8 scale is coarse
  c.w =
      quantize_weight(Tensor::from_vector(normal(size_t(out * in), 0.05f, seed + 1), {out, in}), f);
  c.packed.resize(size_t(out / 8 * in / 32 * cpu::x8_block_bytes(f)));
  cpu::repack_x8(f, c.w.blocks.data<uint8_t>(), out, in, c.packed.data());
  return c;
}

std::vector<float> run(QuantIsa isa, const Case& c, const uint8_t* packed) {
  std::vector<float> y(size_t(c.m * c.out), NAN);
  cpu::quant_linear(isa, c.f, c.x.data(), c.m, c.in, c.w.blocks.data<uint8_t>(), c.out, y.data(),
                    packed);
  return y;
}

}  // namespace

// Element k of row o, block b read back from the packed bytes equals the GGML block's (q8_0: plus
// 128), and so does the scale.
TEST(QuantRepack, LayoutHoldsEveryElementAndScale) {
  for (QuantFormat f : {QuantFormat::q4_0, QuantFormat::q8_0}) {
    const Case c = make_case(f, 1, 16, 96, 3);
    const uint8_t* w = c.w.blocks.data<uint8_t>();
    const int64_t blocks = c.in / 32, bytes = quant_block_bytes(f);
    for (int64_t o = 0; o < c.out; ++o)
      for (int64_t b = 0; b < blocks; ++b) {
        const uint8_t* src = w + o * blocks * bytes + bytes * b;
        const uint8_t* dst = c.packed.data() + (o / 8 * blocks + b) * cpu::x8_block_bytes(f);
        const int r = int(o % 8);
        ASSERT_EQ(std::memcmp(src, dst + 2 * r, 2), 0) << "row " << o << " block " << b;
        for (int k = 0; k < 32; ++k) {
          int want, got;
          if (f == QuantFormat::q4_0) {
            want = k < 16 ? src[2 + k] & 0xF : src[2 + k - 16] >> 4;
            const uint8_t byte = dst[16 + 32 * (k / 8) + 4 * r + k % 4];
            got = k % 8 < 4 ? byte & 0xF : byte >> 4;
          } else {
            want = int8_t(src[2 + k]);
            got = int(dst[16 + 32 * (k / 4) + 4 * r + k % 4]) - 128;
          }
          ASSERT_EQ(got, want) << quant_name(f) << " row " << o << " element " << k;
        }
      }
  }
}

// q4_K, per row group and super-block of 256: d and dmin of row r at 2r and 16 + 2r; sub-block
// j's 6-bit scale and min, low 4 bits in byte 32 + 8j + r, top 2 in byte 96 + (8j + r) % 32
// (nibble j / 4); element l of sub-block j in chunk l / 8 of its 128 bytes at 128 + 128 j, as
// q4_0's. Each equals what GGML's block holds (dequantize_row's reading, compared in floats).
TEST(QuantRepack, Q4kLayoutHoldsEveryElementScaleAndMin) {
  const Case c = make_case(QuantFormat::q4_k, 1, 16, 512, 4);
  const uint8_t* w = c.w.blocks.data<uint8_t>();
  const int64_t supers = c.in / 256;
  std::vector<float> row(size_t(c.in));
  auto half = [](const uint8_t* p) { return half_to_float(uint16_t(p[0] | (p[1] << 8))); };
  for (int64_t o = 0; o < c.out; ++o) {
    dequantize_row(QuantFormat::q4_k, w + o * supers * 144, c.in, row.data());
    const int r = int(o % 8);
    for (int64_t s = 0; s < supers; ++s) {
      const uint8_t* dst = c.packed.data() + (o / 8 * supers + s) * 1152;
      ASSERT_EQ(std::memcmp(w + o * supers * 144 + 144 * s, dst + 2 * r, 2), 0);
      ASSERT_EQ(std::memcmp(w + o * supers * 144 + 144 * s + 2, dst + 16 + 2 * r, 2), 0);
      const float d = half(dst + 2 * r), dmin = half(dst + 16 + 2 * r);
      for (int j = 0; j < 8; ++j) {
        const int k = 8 * j + r, lo = dst[32 + k], hi = (dst[96 + k % 32] >> (4 * (j / 4))) & 0xF;
        const int sc = (lo & 0xF) | ((hi & 3) << 4), mn = (lo >> 4) | ((hi >> 2) << 4);
        for (int l = 0; l < 32; ++l) {
          const uint8_t byte = dst[128 + 128 * j + 32 * (l / 8) + 4 * r + l % 4];
          const int q = l % 8 < 4 ? byte & 0xF : byte >> 4;
          const float scale = d * float(sc), offset = dmin * float(mn);
          ASSERT_EQ(scale * float(q) - offset, row[size_t(256 * s + 32 * j + l)])
              << "row " << o << " super-block " << s << " sub-block " << j << " element " << l;
        }
      }
    }
  }
}

// Within the int8 activations' error bound of the float64 product (as quant_linear_test), on
// decode and prefill shapes, odd block counts included; AVX2 and VNNI equal bit for bit.
TEST(QuantRepack, MatchesFloat64AndIsasAgree) {
  uint32_t seed = 10;
  for (QuantFormat f : kFormats)
    for (auto [m, out, rows_in] : std::vector<std::array<int64_t, 3>>{
             {1, 8, 32}, {1, 64, 96}, {3, 40, 224}, {5, 16, 512}, {8, 24, 256}, {13, 32, 768}}) {
      const Case c = make_case(f, m, out, rows_in, seed += 2);
      const int64_t in = c.in;  // q4_K's rounded up
      Tensor deq = dequantize_weight(c.w);
      const float* dw = deq.data<float>();
      std::vector<std::vector<float>> ys;
      for (QuantIsa isa : x8_isas(f)) ys.push_back(run(isa, c, c.packed.data()));
      if (ys.empty()) continue;  // a CPU without AVX2: the row-at-a-time path
      for (size_t i = 1; i < ys.size(); ++i)
        ASSERT_EQ(std::memcmp(ys[0].data(), ys[i].data(), ys[0].size() * 4), 0) << "m " << m;
      for (int64_t r = 0; r < m; ++r)
        for (int64_t o = 0; o < out; ++o) {
          double ref = 0, bound = 0, mag = 0;
          for (int64_t b = 0; b < in / 32; ++b) {
            double amax = 0;
            for (int i = 0; i < 32; ++i)
              amax = std::max(amax, double(std::fabs(c.x[r * in + 32 * b + i])));
            for (int i = 0; i < 32; ++i) {
              const double wv = dw[o * in + 32 * b + i], xv = c.x[r * in + 32 * b + i];
              ref += wv * xv, bound += std::fabs(wv) * amax / 127 / 2, mag += std::fabs(wv * xv);
            }
          }
          ASSERT_LE(std::fabs(double(ys[0][size_t(r * out + o)]) - ref),
                    bound * 1.01 + 1e-5 * mag + 1e-6)
              << quant_name(f) << " [" << m << ", " << in << "] x [" << out << ", " << in
              << "]^T, row " << r << " output " << o;
        }
    }
}

// q8_0's extremes (codes -128 and 127 against activations of +-127): AVX2's pair sums (|w| a with
// w's sign) do not saturate and give VNNI's bits; both equal the exact integer dot products.
TEST(QuantRepack, Q8ExtremesAgreeOnAvx2AndVnni) {
  Case c = make_case(QuantFormat::q8_0, 2, 16, 64, 90);
  uint8_t* w = c.w.blocks.data<uint8_t>();
  const int64_t row_bytes = c.w.blocks.size(1);
  for (int64_t o = 0; o < c.out; ++o)
    for (int64_t b = 0; b < 2; ++b)
      for (int k = 0; k < 32; ++k)  // rows of -128, of 127, and mixed
        w[o * row_bytes + 34 * b + 2 + k] = uint8_t(o % 3 == 0   ? -128
                                                    : o % 3 == 1 ? 127
                                                                 : (k % 2 ? -128 : 127));
  for (size_t i = 0; i < c.x.size(); ++i) c.x[i] = i % 3 == 0 ? -1.0f : 1.0f;  // q = +-127
  cpu::repack_x8(c.f, w, c.out, c.in, c.packed.data());
  std::vector<std::vector<float>> ys;
  for (QuantIsa isa : x8_isas(c.f)) ys.push_back(run(isa, c, c.packed.data()));
  for (size_t i = 1; i < ys.size(); ++i)
    EXPECT_EQ(std::memcmp(ys[0].data(), ys[i].data(), ys[0].size() * 4), 0);
  if (ys.empty()) return;
  Tensor deq = dequantize_weight(c.w);
  for (int64_t r = 0; r < c.m; ++r)
    for (int64_t o = 0; o < c.out; ++o) {
      double ref = 0;  // activations +-1 quantize exactly (d = 1 / 127)
      for (int64_t i = 0; i < c.in; ++i)
        ref += double(deq.data<float>()[o * c.in + i]) * c.x[r * c.in + i];
      EXPECT_NEAR(ys[0][size_t(r * c.out + o)], ref, 1e-4 * std::fabs(ref) + 1e-4)
          << "row " << r << " output " << o;
    }
}

// Each activation row alone, and the whole batch on one and on two threads, give the same bits.
TEST(QuantRepack, RowsIndependentOfBatchAndThreads) {
  for (QuantFormat f : kFormats) {
    const Case c = make_case(f, 7, 1024, 768, 40);  // over 64 KiB of blocks: split over the pool
    for (QuantIsa isa : x8_isas(f)) {
      std::vector<float> batch;
      {
        ThreadsScope one(1);
        batch = run(isa, c, c.packed.data());
      }
      ThreadsScope two(2);
      EXPECT_EQ(run(isa, c, c.packed.data()), batch)
          << quant_name(f) << " on " << cpu::quant_isa_name(isa);
      for (int64_t r = 0; r < c.m; ++r) {
        Case row{f, 1, c.out, c.in, {}, c.w, {}};
        row.x.assign(c.x.begin() + r * c.in, c.x.begin() + (r + 1) * c.in);
        const std::vector<float> y = run(isa, row, c.packed.data());
        ASSERT_EQ(std::memcmp(y.data(), batch.data() + r * c.out, size_t(c.out) * 4), 0)
            << quant_name(f) << " on " << cpu::quant_isa_name(isa) << " row " << r;
      }
    }
  }
}

// At inference (grad mode off) the op repacks a weight once (the same copy on the next call) and
// uses it; 12 rows are no multiple of 8, so that weight keeps the row-at-a-time path, and so does
// every weight while grad mode is on (training: no second copy of a frozen base).
TEST(QuantRepack, OpUsesTheCachedCopyAtInference) {
  const QuantIsa isa = cpu::quant_isa();
  auto op = [](const Case& c) {
    Tensor y = ops::quantized_linear(Tensor::from_vector(c.x, {c.m, c.in}), c.w);
    return std::vector<float>(y.data<float>(), y.data<float>() + c.m * c.out);
  };
  for (QuantFormat f : kFormats) {
    const Case c = make_case(f, 2, 24, 64, 50), odd = make_case(f, 2, 12, 64, 60);
    EXPECT_EQ(op(c), run(isa, c, nullptr)) << quant_name(f) << " with grad mode on";
    NoGradGuard no_grad;
    auto first = cpu::x8_copy(c.w.blocks, f, c.out, c.in);
    EXPECT_EQ(cpu::x8_copy(c.w.blocks, f, c.out, c.in), first);
    EXPECT_EQ(*first, c.packed);
    EXPECT_EQ(op(c), run(isa, c, cpu::x8_applies(isa, f, c.out) ? c.packed.data() : nullptr))
        << quant_name(f);
    EXPECT_EQ(op(odd), run(isa, odd, nullptr)) << quant_name(f);
  }
}

// Training after an evaluation: the first call with grad mode on drops the evaluation's copy.
TEST(QuantRepack, TrainingDropsTheCopy) {
  const Case c = make_case(QuantFormat::q4_0, 1, 16, 64, 70);
  const Tensor x = Tensor::from_vector(c.x, {c.m, c.in});
  std::shared_ptr<const std::vector<uint8_t>> first;
  {
    NoGradGuard no_grad;
    ops::quantized_linear(x, c.w);
    first = cpu::x8_copy(c.w.blocks, c.f, c.out, c.in);
    EXPECT_EQ(cpu::x8_copy(c.w.blocks, c.f, c.out, c.in), first);
  }
  ops::quantized_linear(x, c.w);
  EXPECT_NE(cpu::x8_copy(c.w.blocks, c.f, c.out, c.in), first);  // made anew
}

// A weight held interleaved (core/quant_x8.h, what pack_for_inference keeps): it converts back
// to the GGML blocks bit for bit, is checked and dequantized as they are, and the op reads it as
// it is, with either grad mode and at float64, giving the blocks' bits and making no copy.
TEST(QuantRepack, OpReadsAWeightHeldInterleaved) {
  const QuantIsa isa = cpu::quant_isa();
  for (QuantFormat f : kFormats) {
    const Case c = make_case(f, 3, 24, 96, 80);
    const QuantizedWeight x8 = quant_to_x8(c.w);
    ASSERT_TRUE(quant_is_x8(x8));
    ASSERT_EQ(x8.blocks.nbytes(), c.w.blocks.nbytes());
    EXPECT_EQ(std::memcmp(x8.blocks.data<uint8_t>(), c.packed.data(), c.packed.size()), 0);
    const QuantizedWeight back = quant_to_ggml(x8);
    ASSERT_EQ(
        std::memcmp(back.blocks.data<uint8_t>(), c.w.blocks.data<uint8_t>(), c.w.blocks.nbytes()),
        0)
        << quant_name(f);
    QuantizedWeight own{c.w.blocks.clone(), f, c.out, c.in};  // nothing else holds its bytes
    const void* at = own.blocks.raw_data();
    own = quant_to_x8_in_place(own);
    EXPECT_EQ(own.blocks.raw_data(), at) << "not packed in place";
    EXPECT_TRUE(quant_is_x8(own));
    EXPECT_EQ(std::memcmp(own.blocks.data<uint8_t>(), c.packed.data(), c.packed.size()), 0);
    const QuantizedWeight shared = c.w;  // held twice: a copy, c.w untouched
    EXPECT_NE(quant_to_x8_in_place(shared).blocks.raw_data(), shared.blocks.raw_data());
    check_quantized_weight(x8, "test");
    QuantizedWeight bad = x8;
    bad.blocks = Tensor::empty({3, x8.blocks.size(1) - 8}, DType::u8);  // a row group short
    EXPECT_THROW(check_quantized_weight(bad, "test"), std::exception);
    Tensor d = dequantize_weight(x8), e = dequantize_weight(c.w);
    EXPECT_EQ(std::memcmp(d.data<float>(), e.data<float>(), d.nbytes()), 0);
    const Tensor x = Tensor::from_vector(c.x, {c.m, c.in});
    auto values = [&](const Tensor& y) {
      return std::vector<float>(y.data<float>(), y.data<float>() + c.m * c.out);
    };
    const std::vector<float> want =
        run(isa, c, cpu::x8_applies(isa, f, c.out) ? c.packed.data() : nullptr);
    EXPECT_EQ(values(ops::quantized_linear(x, x8)), want) << quant_name(f) << ", grad mode on";
    NoGradGuard no_grad;
    const int64_t cached = cpu::x8_cached_bytes();
    EXPECT_EQ(values(ops::quantized_linear(x, x8)), want) << quant_name(f);
    EXPECT_EQ(cpu::x8_cached_bytes(), cached);
    Tensor y64 = ops::quantized_linear(x.to(DType::f64), x8),
           r64 = ops::quantized_linear(x.to(DType::f64), c.w);
    EXPECT_EQ(std::memcmp(y64.raw_data(), r64.raw_data(), y64.nbytes()), 0) << quant_name(f);
  }
}
