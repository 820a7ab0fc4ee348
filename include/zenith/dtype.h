// Element types and the 16-bit float conversions.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace zenith {

enum class DType : uint8_t { f32, f64, f16, bf16, i32, i64, u8, b8 };

constexpr DType kFloat32 = DType::f32;
constexpr DType kFloat64 = DType::f64;
constexpr DType kFloat16 = DType::f16;
constexpr DType kBFloat16 = DType::bf16;
constexpr DType kInt32 = DType::i32;
constexpr DType kInt64 = DType::i64;
constexpr DType kUInt8 = DType::u8;
constexpr DType kBool = DType::b8;

size_t itemsize(DType t);
const char* dtype_name(DType t);  // "float32", "int64", ... (safetensors uses its own: F32, I64)
DType dtype_from_name(const std::string& name);  // accepts "float32"/"f32"/"F32"
bool is_floating(DType t);
// The type both operands of a binary op are promoted to (PyTorch's rules, no scalar special case).
DType promote_types(DType a, DType b);

// IEEE half and bfloat16 stored as raw bits.
struct Half {
  uint16_t bits = 0;
};
struct BFloat16 {
  uint16_t bits = 0;
};

float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
inline float bf16_to_float(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t float_to_bf16(float f) {  // round to nearest even
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x7fffffu)) return uint16_t((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

}  // namespace zenith
