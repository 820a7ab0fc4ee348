// CPU unary elementwise kernels: one functor per op, one loop for all of them.
#include <cmath>

#include "backend/cpu/loops.h"
#include "core/dispatch.h"

namespace zenith::cpu {
namespace {

struct Neg { template <typename T> T operator()(T x) const { return -x; } };

// out = F(x) elementwise; out is contiguous with x's shape and dtype.
template <typename F>
std::vector<Tensor> unary_kernel(const std::vector<Tensor>& in, const dispatch::Attrs&) {
  const Tensor& x = in[0];
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  StridedLoop<2> loop(x.shape(), {out.strides(), x.strides()});
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    if constexpr (std::is_same_v<T, bool>) {
      ZENITH_FAIL("[unary] not supported on bool tensors");
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

ZENITH_REGISTER_KERNEL("neg", CPU, unary_kernel<Neg>);

}  // namespace
}  // namespace zenith::cpu
