// The contiguous float32 <-> bfloat16 casts (src/backend/cpu/copy.cpp, 8 at a time) against the
// scalar float_to_bf16 / bf16_to_float bit for bit: ties to even, NaN, infinities, signed zero,
// subnormals, and tails of every length below 8; a strided view takes the scalar loop alike.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "support/op_check.h"

using namespace zenith;
using namespace zenith::testing;

namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

TEST(CopyBf16, ContiguousCastsEqualTheScalarRounding) {
  std::mt19937 rng(5);
  std::vector<float> values = {0.f,
                               -0.f,
                               1.f,
                               from_bits(0x3f808000u),  // a tie: rounds to even (down)
                               from_bits(0x3f818000u),  // a tie: rounds to even (up)
                               std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN(),
                               from_bits(0x7f800001u),  // a signalling NaN: stays a NaN
                               std::numeric_limits<float>::denorm_min(),
                               std::numeric_limits<float>::max()};
  for (int i = 0; i < 1000; ++i) values.push_back(from_bits(uint32_t(rng())));
  for (size_t n : {values.size(), size_t(7), size_t(1), size_t(9)}) {
    std::vector<float> v(values.begin(), values.begin() + long(n));
    Tensor x = Tensor::from_vector(v, {int64_t(n)});
    Tensor b = x.to(DType::bf16);
    const uint16_t* bits = static_cast<const uint16_t*>(b.raw_data());
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(bits[i], float_to_bf16(v[i])) << i << " of " << n;
    Tensor back = b.to(DType::f32);
    for (size_t i = 0; i < n; ++i) {
      const float got = back.data<float>()[i], want = bf16_to_float(bits[i]);
      ASSERT_EQ(std::memcmp(&got, &want, 4), 0) << i;
    }
  }
  // A strided view (every other element) rounds alike.
  Tensor x = Tensor::from_vector(values, {int64_t(values.size())});
  Tensor strided = x.narrow(0, 0, 1000).view({500, 2}).select(1, 0).to(DType::bf16);
  for (int64_t i = 0; i < 500; ++i)
    ASSERT_EQ(static_cast<const uint16_t*>(strided.raw_data())[i],
              float_to_bf16(values[size_t(2 * i)]));
}
