// CPU unary elementwise kernels: one functor per op, one loop for all of them. float32 uses the
// vectorisable math of math_simd.h; float64 is the reference and uses std::. The gradients are
// ops composed in src/ops/unary.cpp; relu_backward (the hot path of CNNs, on oneDNN blocked
// activations too), silu_backward and gelu_backward (of transformer MLPs) also have fused
// kernels here.
#include <cmath>

#include "backend/cpu/loops.h"
#include "backend/cpu/math_simd.h"
#include "backend/cpu/onednn_layout.h"
#include "core/dispatch.h"

namespace zenith::cpu {
namespace {

constexpr double kSqrtHalf = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;     // 1 / sqrt(2 pi)
constexpr double kGeluTanhScale = 0.79788456080286535588;  // sqrt(2 / pi)
constexpr double kGeluTanhCubic = 0.044715;

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

// ---- fused gradient: dx = F(dy, y), y being the op's output.
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
// out = F(x) elementwise; out is contiguous with x's shape and dtype.
template <typename F>
std::vector<Tensor> unary_kernel(const std::vector<Tensor>& in, const NoAttrs&) {
  const Tensor& x = in[0];
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  StridedLoop<2> loop(x.shape(), {out.strides(), x.strides()});
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    if constexpr (std::is_same_v<T, bool>) {
      ZENITH_FAIL("[unary] not supported on bool tensors");
    } else if constexpr (F::kFloatOnly && !std::is_floating_point_v<C>) {
      ZENITH_FAIL("[unary] expected a floating tensor, got ", dtype_name(x.dtype()));
    } else {
      T* o = out.data<T>();
      const T* p = x.data<T>();
      F f;
      loop.run([&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) {
        T* op = o + off[0];
        const T* xp = p + off[1];
        if constexpr (std::is_same_v<T, C>) {
          if (st[1] == 1) {
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) op[i] = f(xp[i]);
            return;
          }
        }
        for (int64_t i = 0; i < n; ++i) op[i * st[0]] = store<T>(f(C(load(xp[i * st[1]]))));
      });
    }
  });
  return {out};
}

// dx = F(dy, saved) over saved's shape; dy may be strided or broadcast (e.g. from sum's
// backward), and is converted to saved's dtype when it differs.
template <typename F>
std::vector<Tensor> unary_backward_kernel(const std::vector<Tensor>& in, const NoAttrs&) {
  const Tensor& saved = in[1];
  Tensor dy = in[0].dtype() == saved.dtype() ? in[0] : in[0].to(saved.dtype());
  const Shape& shape = saved.shape();
  Tensor dx = Tensor::empty(shape, saved.dtype(), saved.device());
  StridedLoop<3> loop(shape, {dx.strides(), broadcast_strides(dy, shape), saved.strides()});
  visit_dtype(saved.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    if constexpr (!std::is_floating_point_v<C>) {
      ZENITH_FAIL("[backward] expected a floating tensor, got ", dtype_name(saved.dtype()));
    } else {
      T* o = dx.data<T>();
      const T* g = dy.data<T>();
      const T* s = saved.data<T>();
      F f;
      loop.run([&](const std::array<int64_t, 3>& off, int64_t n, const std::array<int64_t, 3>& st) {
        T* op = o + off[0];
        const T* gp = g + off[1];
        const T* sp = s + off[2];
        if constexpr (std::is_same_v<T, C>) {
          if (st[1] == 1 && st[2] == 1) {
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) op[i] = f(gp[i], sp[i]);
            return;
          }
          if (st[1] == 0 && st[2] == 1) {
            const T gv = gp[0];
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) op[i] = f(gv, sp[i]);
            return;
          }
        }
        for (int64_t i = 0; i < n; ++i)
          op[i * st[0]] = store<T>(f(C(load(gp[i * st[1]])), C(load(sp[i * st[2]]))));
      });
    }
  });
  return {dx};
}

ZENITH_REGISTER_KERNEL(neg, CPU, unary_kernel<Neg>);
ZENITH_REGISTER_KERNEL(abs, CPU, unary_kernel<Abs>);
ZENITH_REGISTER_KERNEL(square, CPU, unary_kernel<Square>);
// relu also runs on oneDNN blocked activations (as flat arrays), keeping them blocked.
ZENITH_REGISTER_KERNEL(relu, CPU, layout_elementwise<unary_kernel<Relu>>);
ZENITH_LAYOUT_AWARE(relu);
ZENITH_REGISTER_KERNEL(exp, CPU, unary_kernel<Exp>);
ZENITH_REGISTER_KERNEL(log, CPU, unary_kernel<Log>);
ZENITH_REGISTER_KERNEL(sqrt, CPU, unary_kernel<Sqrt>);
ZENITH_REGISTER_KERNEL(rsqrt, CPU, unary_kernel<Rsqrt>);
ZENITH_REGISTER_KERNEL(tanh, CPU, unary_kernel<Tanh>);
ZENITH_REGISTER_KERNEL(sigmoid, CPU, unary_kernel<Sigmoid>);
ZENITH_REGISTER_KERNEL(silu, CPU, unary_kernel<Silu>);
ZENITH_REGISTER_KERNEL(gelu, CPU, unary_kernel<Gelu>);
ZENITH_REGISTER_KERNEL(gelu_tanh, CPU, unary_kernel<GeluTanh>);
ZENITH_REGISTER_KERNEL(erf, CPU, unary_kernel<Erf>);

// The fast path of relu's gradient (its decomposition is in src/ops/unary.cpp).
ZENITH_REGISTER_KERNEL(relu_backward, CPU, layout_elementwise<unary_backward_kernel<ReluBackward>>);
ZENITH_LAYOUT_AWARE(relu_backward);
// Fast paths of the transformer activations' gradients (composed forms in src/ops/unary.cpp).
ZENITH_REGISTER_KERNEL(silu_backward, CPU, unary_backward_kernel<SiluBackward>);
ZENITH_REGISTER_KERNEL(gelu_backward, CPU, unary_backward_kernel<GeluBackward>);

}  // namespace
}  // namespace zenith::cpu
