#include "zenith/dtype.h"

#include <algorithm>

#include "zenith/device.h"
#include "zenith/error.h"

namespace zenith {

size_t itemsize(DType t) {
  switch (t) {
    case DType::f32:
    case DType::i32:
      return 4;
    case DType::f64:
    case DType::i64:
      return 8;
    case DType::f16:
    case DType::bf16:
      return 2;
    case DType::u8:
    case DType::b8:
      return 1;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "float32";
    case DType::f64:
      return "float64";
    case DType::f16:
      return "float16";
    case DType::bf16:
      return "bfloat16";
    case DType::i32:
      return "int32";
    case DType::i64:
      return "int64";
    case DType::u8:
      return "uint8";
    case DType::b8:
      return "bool";
  }
  return "?";
}

DType dtype_from_name(const std::string& name) {
  std::string n = name;
  std::transform(n.begin(), n.end(), n.begin(), ::tolower);
  if (n == "float32" || n == "f32" || n == "float") return DType::f32;
  if (n == "float64" || n == "f64" || n == "double") return DType::f64;
  if (n == "float16" || n == "f16" || n == "half") return DType::f16;
  if (n == "bfloat16" || n == "bf16") return DType::bf16;
  if (n == "int32" || n == "i32") return DType::i32;
  if (n == "int64" || n == "i64" || n == "long") return DType::i64;
  if (n == "uint8" || n == "u8") return DType::u8;
  if (n == "bool" || n == "b8") return DType::b8;
  ZENITH_FAIL("[dtype] unknown dtype '", name,
              "' (known: float32 float64 float16 bfloat16 int32 int64 uint8 bool)");
}

bool is_floating(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16;
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  auto rank = [](DType t) {
    switch (t) {
      case DType::b8:
        return 0;
      case DType::u8:
        return 1;
      case DType::i32:
        return 2;
      case DType::i64:
        return 3;
      case DType::f16:
        return 4;
      case DType::bf16:
        return 4;
      case DType::f32:
        return 5;
      case DType::f64:
        return 6;
    }
    return 0;
  };
  if ((a == DType::f16 && b == DType::bf16) || (a == DType::bf16 && b == DType::f16))
    return DType::f32;
  return rank(a) >= rank(b) ? a : b;
}

float half_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t u;
  if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while (!(mant & 0x400)) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ff;
      u = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | (mant << 13);
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t float_to_half(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000;
  int32_t exp = int32_t((u >> 23) & 0xff) - 127 + 15;
  uint32_t mant = u & 0x7fffff;
  if (((u >> 23) & 0xff) == 0xff) return uint16_t(sign | 0x7c00 | (mant ? 0x200 : 0));
  if (exp >= 31) return uint16_t(sign | 0x7c00);
  if (exp <= 0) {
    if (exp < -10) return uint16_t(sign);
    mant |= 0x800000;
    uint32_t shift = uint32_t(14 - exp);
    uint32_t half_mant = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_mant & 1))) ++half_mant;
    return uint16_t(sign | half_mant);
  }
  uint32_t half = sign | (uint32_t(exp) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;  // may carry into exponent: fine
  return uint16_t(half);
}

const char* device_type_name(DeviceType type) {
  switch (type) {
    case DeviceType::CPU:
      return "cpu";
    case DeviceType::CUDA:
      return "cuda";
    case DeviceType::PrivateUse1:
      return "privateuse1";
  }
  return "unknown";
}

std::string Device::str() const {
  if (type == DeviceType::CPU) return "cpu";
  return std::string(device_type_name(type)) + ":" + std::to_string(index);
}

}  // namespace zenith
