// CPU comparison and selection kernels: eq/ne/lt/le/gt/ge (bool out), where, masked_fill.
#include <algorithm>

#include "backend/cpu/loops.h"
#include "backend/cpu/math_simd.h"
#include "core/dispatch.h"

namespace zenith::cpu {
namespace {

struct Eq {
  template <typename T>
  bool operator()(T a, T b) const {
    return a == b;
  }
};
struct Ne {
  template <typename T>
  bool operator()(T a, T b) const {
    return a != b;
  }
};
struct Lt {
  template <typename T>
  bool operator()(T a, T b) const {
    return a < b;
  }
};
struct Le {
  template <typename T>
  bool operator()(T a, T b) const {
    return a <= b;
  }
};
struct Gt {
  template <typename T>
  bool operator()(T a, T b) const {
    return a > b;
  }
};
struct Ge {
  template <typename T>
  bool operator()(T a, T b) const {
    return a >= b;
  }
};

Tensor as_dtype(const Tensor& t, DType dtype) { return t.dtype() == dtype ? t : t.to(dtype); }

// out[i] = F(a[i], b[i]) as bool over the broadcast shape, compared in the promoted dtype.
template <typename F>
std::vector<Tensor> compare_kernel(const std::vector<Tensor>& in, const NoAttrs&) {
  DType dtype = promote_types(in[0].dtype(), in[1].dtype());
  Tensor a = as_dtype(in[0], dtype), b = as_dtype(in[1], dtype);
  Shape shape = broadcast_shapes(a.shape(), b.shape(), "compare");
  Tensor out = Tensor::empty(shape, DType::b8, a.device());
  StridedLoop<3> loop(shape,
                      {out.strides(), broadcast_strides(a, shape), broadcast_strides(b, shape)});
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    bool* o = out.data<bool>();
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    F f;
    loop.run([&](const std::array<int64_t, 3>& off, int64_t n, const std::array<int64_t, 3>& st) {
      bool* op = o + off[0];
      const T* ap = pa + off[1];
      const T* bp = pb + off[2];
      if constexpr (std::is_same_v<T, C>) {
        if (st[1] == 1 && st[2] == 1) {
#pragma omp simd
          for (int64_t i = 0; i < n; ++i) op[i] = f(ap[i], bp[i]);
          return;
        }
        if (st[1] == 1 && st[2] == 0) {
          const T bv = bp[0];
#pragma omp simd
          for (int64_t i = 0; i < n; ++i) op[i] = f(ap[i], bv);
          return;
        }
      }
      for (int64_t i = 0; i < n; ++i)
        op[i * st[0]] = f(C(load(ap[i * st[1]])), C(load(bp[i * st[2]])));
    });
  });
  return {out};
}

// where(cond, a, b): cond bool; a and b promoted to one dtype; all three broadcast.
std::vector<Tensor> where_kernel(const std::vector<Tensor>& in, const NoAttrs&) {
  const Tensor& cond = in[0];
  DType dtype = promote_types(in[1].dtype(), in[2].dtype());
  Tensor a = as_dtype(in[1], dtype), b = as_dtype(in[2], dtype);
  Shape shape =
      broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  Tensor out = Tensor::empty(shape, dtype, a.device());
  StridedLoop<4> loop(shape, {out.strides(), broadcast_strides(cond, shape),
                              broadcast_strides(a, shape), broadcast_strides(b, shape)});
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* o = out.data<T>();
    const bool* pc = cond.data<bool>();
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    loop.run([&](const std::array<int64_t, 4>& off, int64_t n, const std::array<int64_t, 4>& st) {
      T* op = o + off[0];
      const bool* cp = pc + off[1];
      const T* ap = pa + off[2];
      const T* bp = pb + off[3];
      if (st[0] == 1 && st[1] == 1 && st[2] == 1 && st[3] == 1) {
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) op[i] = simd::select(cp[i], ap[i], bp[i]);
        return;
      }
      for (int64_t i = 0; i < n; ++i) op[i * st[0]] = cp[i * st[1]] ? ap[i * st[2]] : bp[i * st[3]];
    });
  });
  return {out};
}

// masked_fill(x, mask; value): x where mask is false, value where true; mask broadcasts to x.
std::vector<Tensor> masked_fill_kernel(const std::vector<Tensor>& in, const FillAttrs& attrs) {
  const Tensor& x = in[0];
  const Tensor& mask = in[1];
  const double value = attrs.value;
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  StridedLoop<3> loop(x.shape(), {out.strides(), x.strides(), broadcast_strides(mask, x.shape())});
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* o = out.data<T>();
    const T* px = x.data<T>();
    const bool* pm = mask.data<bool>();
    const T v = store<T>(value);
    loop.run([&](const std::array<int64_t, 3>& off, int64_t n, const std::array<int64_t, 3>& st) {
      T* op = o + off[0];
      const T* xp = px + off[1];
      const bool* mp = pm + off[2];
      if (st[0] == 1 && st[1] == 1 && st[2] == 1) {  // e.g. an attention mask of x's shape
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) op[i] = simd::select(mp[i], v, xp[i]);
        return;
      }
      if (st[0] == 1 && st[1] == 1 && st[2] == 0) {  // mask broadcast along the row
        if (mp[0])
          std::fill(op, op + n, v);
        else
          std::copy(xp, xp + n, op);
        return;
      }
      for (int64_t i = 0; i < n; ++i) op[i * st[0]] = mp[i * st[2]] ? v : xp[i * st[1]];
    });
  });
  return {out};
}

ZENITH_REGISTER_KERNEL(eq, CPU, compare_kernel<Eq>);
ZENITH_REGISTER_KERNEL(ne, CPU, compare_kernel<Ne>);
ZENITH_REGISTER_KERNEL(lt, CPU, compare_kernel<Lt>);
ZENITH_REGISTER_KERNEL(le, CPU, compare_kernel<Le>);
ZENITH_REGISTER_KERNEL(gt, CPU, compare_kernel<Gt>);
ZENITH_REGISTER_KERNEL(ge, CPU, compare_kernel<Ge>);
ZENITH_REGISTER_KERNEL(where, CPU, where_kernel);
ZENITH_REGISTER_KERNEL(masked_fill, CPU, masked_fill_kernel);

}  // namespace
}  // namespace zenith::cpu
