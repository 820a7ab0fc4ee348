// The elementwise math of the CPU backend, one functor per op: the unary and binary kernels
// (unary.cpp, binary.cpp) and graph mode's fused elementwise loop (fused_elementwise.cpp) apply
// the same functors, so a fused chain computes exactly what the ops compute one by one.
// float32 uses the vectorisable math of math_simd.h; float64 is the reference and uses std::.
#pragma once

#include <cmath>
#include <type_traits>

#include "backend/cpu/math_simd.h"

namespace zenith::cpu {

inline constexpr double kSqrtHalf = 0.70710678118654752440;
inline constexpr double kInvSqrt2Pi = 0.39894228040143267794;     // 1 / sqrt(2 pi)
inline constexpr double kGeluTanhScale = 0.79788456080286535588;  // sqrt(2 / pi)
inline constexpr double kGeluTanhCubic = 0.044715;

template <typename T>
ZENITH_SIMD_INLINE T exp_of(T x) {
  if constexpr (std::is_same_v<T, float>)
    return simd::exp(x);
  else
    return std::exp(x);
}
template <typename T>
ZENITH_SIMD_INLINE T tanh_of(T x) {
  if constexpr (std::is_same_v<T, float>)
    return simd::tanh(x);
  else
    return std::tanh(x);
}
template <typename T>
ZENITH_SIMD_INLINE T sigmoid_of(T x) {
  if constexpr (std::is_same_v<T, float>)
    return simd::sigmoid(x);
  else
    return T(1) / (T(1) + std::exp(-x));
}
template <typename T>
ZENITH_SIMD_INLINE T normal_cdf_of(T x) {
  if constexpr (std::is_same_v<T, float>)
    return simd::normal_cdf(x);
  else
    return T(0.5) * std::erfc(-x * T(kSqrtHalf));
}
// The argument of tanh in gelu's tanh approximation.
template <typename T>
ZENITH_SIMD_INLINE T gelu_tanh_arg(T x) {
  return T(kGeluTanhScale) * (x + T(kGeluTanhCubic) * x * x * x);
}

// ---- forward functors. kFloatOnly: the op promotes integer inputs to float (done by the op).
struct Neg {
  static constexpr bool kFloatOnly = false;
  template <typename T>
  ZENITH_SIMD_INLINE T operator()(T x) const {
    return -x;
  }
};
struct Abs {
  static constexpr bool kFloatOnly = false;
  template <typename T>
  ZENITH_SIMD_INLINE T operator()(T x) const {
    if constexpr (std::is_same_v<T, float>)
      return simd::abs(x);
    else if constexpr (std::is_floating_point_v<T>)
      return std::abs(x);
    else if constexpr (std::is_unsigned_v<T>)
      return x;
    else
      return x < 0 ? T(-x) : x;
  }
};
struct Square {
  static constexpr bool kFloatOnly = false;
  template <typename T>
  ZENITH_SIMD_INLINE T operator()(T x) const {
    return x * x;
  }
};
struct Relu {
  static constexpr bool kFloatOnly = false;
  // x < 0 ? 0 : x keeps NaN, as PyTorch does.
  template <typename T>
  ZENITH_SIMD_INLINE T operator()(T x) const {
    return simd::select(x < T(0), T(0), x);
  }
};
struct Exp {
  static constexpr bool kFloatOnly = true;
  template <typename T>
  ZENITH_SIMD_INLINE T operator()(T x) const {
    return exp_of(x);
  }
};
struct Log {
  static constexpr bool kFloatOnly = true;
  template <typename T>
  ZENITH_SIMD_INLINE T operator()(T x) const {
    if constexpr (std::is_same_v<T, float>)
      return simd::log(x);
    else
      return std::log(x);
  }
};
struct Sqrt {
  static constexpr bool kFloatOnly = true;
  template <typename T>
  ZENITH_SIMD_INLINE T operator()(T x) const {
    return std::sqrt(x);
  }
};
struct Rsqrt {
  static constexpr bool kFloatOnly = true;
  template <typename T>
  ZENITH_SIMD_INLINE T operator()(T x) const {
    return T(1) / std::sqrt(x);
  }
};
struct Tanh {
  static constexpr bool kFloatOnly = true;
  template <typename T>
  ZENITH_SIMD_INLINE T operator()(T x) const {
    return tanh_of(x);
  }
};
struct Sigmoid {
  static constexpr bool kFloatOnly = true;
  template <typename T>
  ZENITH_SIMD_INLINE T operator()(T x) const {
    return sigmoid_of(x);
  }
};
struct Silu {
  static constexpr bool kFloatOnly = true;
  template <typename T>
  ZENITH_SIMD_INLINE T operator()(T x) const {
    return x * sigmoid_of(x);
  }
};
// x * Phi(x)
struct Gelu {
  static constexpr bool kFloatOnly = true;
  template <typename T>
  ZENITH_SIMD_INLINE T operator()(T x) const {
    return x * normal_cdf_of(x);
  }
};
// x/2 (1 + tanh(u)) = x sigmoid(2u): the sigmoid form keeps relative accuracy for x << 0.
struct GeluTanh {
  static constexpr bool kFloatOnly = true;
  template <typename T>
  ZENITH_SIMD_INLINE T operator()(T x) const {
    return x * sigmoid_of(T(2) * gelu_tanh_arg(x));
  }
};
struct Erf {
  static constexpr bool kFloatOnly = true;
  template <typename T>
  ZENITH_SIMD_INLINE T operator()(T x) const {
    return std::erf(x);
  }
};

// ---- fused gradients: dx = F(dy, saved), the saved tensor being the op's output or input.
struct ReluBackward {  // saved y
  template <typename T>
  ZENITH_SIMD_INLINE T operator()(T dy, T y) const {
    return simd::select(y > T(0), dy, T(0));
  }
};
struct SiluBackward {  // saved x: dy s (1 + x (1 - s)), s = sigmoid(x)
  template <typename T>
  ZENITH_SIMD_INLINE T operator()(T dy, T x) const {
    T s = sigmoid_of(x);
    return dy * s * (T(1) + x * (T(1) - s));
  }
};
struct GeluBackward {  // saved x: dy (Phi(x) + x phi(x))
  template <typename T>
  ZENITH_SIMD_INLINE T operator()(T dy, T x) const {
    T pdf = T(kInvSqrt2Pi) * exp_of(T(-0.5) * x * x);
    return dy * (normal_cdf_of(x) + x * pdf);
  }
};
// ---- binary
struct Add {
  template <typename T>
  T operator()(T a, T b) const {
    return a + b;
  }
};
struct Sub {
  template <typename T>
  T operator()(T a, T b) const {
    return a - b;
  }
};
struct Mul {
  template <typename T>
  T operator()(T a, T b) const {
    return a * b;
  }
};
struct Div {
  template <typename T>
  T operator()(T a, T b) const {
    return a / b;
  }
};

// a^b for integers by squaring; negative exponents follow integer division (1, -1 or 0).
template <typename T>
inline T int_pow(T a, T b) {
  if constexpr (std::is_signed_v<T>) {
    if (b < 0) return a == 1 ? T(1) : a == -1 ? T((b & 1) ? -1 : 1) : T(0);
  }
  T result = 1;
  while (b > 0) {
    if (b & 1) result = T(result * a);
    a = T(a * a);
    b = T(b >> 1);
  }
  return result;
}

struct Pow {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>)
      return std::pow(a, b);
    else
      return int_pow(a, b);
  }
};
template <typename T>
inline bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>)
    return v != v;
  else
    return false;
}
// NaN in either operand propagates, as in PyTorch.
struct Maximum {
  template <typename T>
  T operator()(T a, T b) const {
    return simd::select(is_nan(a) || a > b, a, b);
  }
};
struct Minimum {
  template <typename T>
  T operator()(T a, T b) const {
    return simd::select(is_nan(a) || a < b, a, b);
  }
};

// x^exponent with a scalar exponent; common exponents avoid std::pow.
template <typename T>
inline T pow_scalar(T x, double e) {
  if constexpr (std::is_floating_point_v<T>) {
    if (e == 2) return x * x;
    if (e == 1) return x;
    if (e == 0.5) return std::sqrt(x);
    if (e == -1) return T(1) / x;
    if (e == 3) return x * x * x;
    if (e == -0.5) return T(1) / std::sqrt(x);
    if (e == 0) return T(1);
    return std::pow(x, T(e));
  } else {
    return int_pow(x, T(e));
  }
}

}  // namespace zenith::cpu
