// CPU unary elementwise kernels: one functor per op (elementwise_functors.h), one loop for all
// of them. float32 uses the vectorisable math of math_simd.h; float64 is the reference and uses
// std::. The gradients are ops composed in src/ops/unary.cpp; relu_backward (the hot path of CNNs,
// on oneDNN blocked activations too), silu_backward and gelu_backward (of transformer MLPs) also
// have fused kernels here.
#include <cmath>

#include "backend/cpu/elementwise_functors.h"
#include "backend/cpu/loops.h"
#include "backend/cpu/onednn_layout.h"
#include "core/dispatch.h"

namespace zenith::cpu {
namespace {

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
