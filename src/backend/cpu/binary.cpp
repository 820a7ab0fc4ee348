// CPU binary elementwise kernels: one functor per op (elementwise_functors.h), one broadcasting
// loop for all of them.
#include <cmath>

#include "backend/cpu/elementwise_functors.h"
#include "backend/cpu/loops.h"
#include "backend/cpu/onednn_layout.h"
#include "core/dispatch.h"

namespace zenith::cpu {
namespace {

// out[i] = F(a[i], b[i]) over the broadcast shape; inputs already have out's dtype.
template <typename F>
void binary_loop(const Tensor& a, const Tensor& b, const Tensor& out) {
  const Shape& shape = out.shape();
  StridedLoop<3> loop(shape,
                      {out.strides(), broadcast_strides(a, shape), broadcast_strides(b, shape)});
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    if constexpr (std::is_same_v<T, bool>) {
      ZENITH_FAIL("[binary] arithmetic on bool tensors is not supported");
    } else {
      T* o = out.data<T>();
      const T* pa = a.data<T>();
      const T* pb = b.data<T>();
      F f;
      loop.run([&](const std::array<int64_t, 3>& off, int64_t n, const std::array<int64_t, 3>& st) {
        T* op = o + off[0];
        const T* ap = pa + off[1];
        const T* bp = pb + off[2];
        if constexpr (std::is_same_v<T, C>) {
          if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) op[i] = f(ap[i], bp[i]);
            return;
          }
          if (st[0] == 1 && st[1] == 1 && st[2] == 0) {
            const T bv = bp[0];
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) op[i] = f(ap[i], bv);
            return;
          }
          if (st[0] == 1 && st[1] == 0 && st[2] == 1) {
            const T av = ap[0];
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) op[i] = f(av, bp[i]);
            return;
          }
        }
        for (int64_t i = 0; i < n; ++i)
          op[i * st[0]] = store<T>(f(C(load(ap[i * st[1]])), C(load(bp[i * st[2]]))));
      });
    }
  });
}

template <typename F>
std::vector<Tensor> binary_kernel(const std::vector<Tensor>& in, const NoAttrs&) {
  DType dtype = promote_types(in[0].dtype(), in[1].dtype());
  Tensor a = in[0].dtype() == dtype ? in[0] : in[0].to(dtype);
  Tensor b = in[1].dtype() == dtype ? in[1] : in[1].to(dtype);
  Tensor out = Tensor::empty(broadcast_shapes(a.shape(), b.shape(), "binary"), dtype, a.device());
  binary_loop<F>(a, b, out);
  return {out};
}

// add/sub/mul also run on oneDNN blocked activations sharing one format (residual adds,
// gradient sums), keeping them blocked.
ZENITH_REGISTER_KERNEL(add, CPU, layout_elementwise<binary_kernel<Add>>);
ZENITH_REGISTER_KERNEL(sub, CPU, layout_elementwise<binary_kernel<Sub>>);
ZENITH_REGISTER_KERNEL(mul, CPU, layout_elementwise<binary_kernel<Mul>>);
ZENITH_LAYOUT_AWARE(add);
ZENITH_LAYOUT_AWARE(sub);
ZENITH_LAYOUT_AWARE(mul);
ZENITH_REGISTER_KERNEL(div, CPU, binary_kernel<Div>);
ZENITH_REGISTER_KERNEL(pow, CPU, binary_kernel<Pow>);
ZENITH_REGISTER_KERNEL(maximum, CPU, binary_kernel<Maximum>);
ZENITH_REGISTER_KERNEL(minimum, CPU, binary_kernel<Minimum>);

// pow_scalar(x; exponent): integer exponents on integer tensors (the op promotes otherwise).
std::vector<Tensor> pow_scalar_kernel(const std::vector<Tensor>& in, const PowScalarAttrs& attrs) {
  const Tensor& x = in[0];
  const double e = attrs.exponent;
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  StridedLoop<2> loop(x.shape(), {out.strides(), x.strides()});
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    if constexpr (std::is_same_v<T, bool>) {
      ZENITH_FAIL("[pow] not supported on bool tensors");
    } else {
      T* o = out.data<T>();
      const T* p = x.data<T>();
      loop.run([&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) {
        T* op = o + off[0];
        const T* xp = p + off[1];
        if constexpr (std::is_same_v<T, C> && std::is_floating_point_v<T>) {
          if (st[0] == 1 && st[1] == 1 && e == 2) {
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) op[i] = xp[i] * xp[i];
            return;
          }
        }
        for (int64_t i = 0; i < n; ++i)
          op[i * st[0]] = store<T>(pow_scalar(C(load(xp[i * st[1]])), e));
      });
    }
  });
  return {out};
}

ZENITH_REGISTER_KERNEL(pow_scalar, CPU, pow_scalar_kernel);

}  // namespace
}  // namespace zenith::cpu
