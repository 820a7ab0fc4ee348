// CPU copy kernels: strided copy with dtype conversion, in-place copy with broadcasting, fill.
#include <cstring>

#include "backend/cpu/loops.h"
#include "core/dispatch.h"

namespace zenith::cpu {
namespace {

// dst[...] = convert(src[...]) over dst's shape; src strides already broadcast.
void strided_convert(const Tensor& dst, const Tensor& src) {
  Shape src_strides = broadcast_strides(src, dst.shape());
  StridedLoop<2> loop(dst.shape(), {dst.strides(), src_strides});
  char* dbase = static_cast<char*>(dst.raw_data());
  const char* sbase = static_cast<const char*>(src.raw_data());
  visit_dtype(dst.dtype(), [&](auto dtag) {
    using D = decltype(dtag);
    visit_dtype(src.dtype(), [&](auto stag) {
      using S = decltype(stag);
      D* d = reinterpret_cast<D*>(dbase);
      const S* s = reinterpret_cast<const S*>(sbase);
      loop.run([&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) {
        D* dp = d + off[0];
        const S* sp = s + off[1];
        if constexpr (std::is_same_v<D, S>) {
          if (st[0] == 1 && st[1] == 1) {
            std::memcpy(dp, sp, size_t(n) * sizeof(D));
            return;
          }
          for (int64_t i = 0; i < n; ++i) dp[i * st[0]] = sp[i * st[1]];
        } else {
          for (int64_t i = 0; i < n; ++i) dp[i * st[0]] = store<D>(load(sp[i * st[1]]));
        }
      });
    });
  });
}

// copy(src; dtype) -> a new contiguous tensor of `dtype`.
std::vector<Tensor> copy_kernel(const std::vector<Tensor>& in, const CopyAttrs& attrs) {
  const Tensor& src = in[0];
  Tensor out = Tensor::empty(src.shape(), attrs.dtype, src.device());
  strided_convert(out, src);
  return {out};
}

// copy_(dst, src): writes src (broadcast, converted) into dst's elements in place.
std::vector<Tensor> copy_inplace_kernel(const std::vector<Tensor>& in, const NoAttrs&) {
  strided_convert(in[0], in[1]);
  return {in[0]};
}

// fill_(dst; value): every element of dst set to value, in place.
std::vector<Tensor> fill_kernel(const std::vector<Tensor>& in, const FillAttrs& attrs) {
  const Tensor& dst = in[0];
  const double value = attrs.value;
  StridedLoop<1> loop(dst.shape(), {dst.strides()});
  visit_dtype(dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* d = static_cast<T*>(dst.raw_data());
    T v = store<T>(value);
    loop.run([&](const std::array<int64_t, 1>& off, int64_t n, const std::array<int64_t, 1>& st) {
      T* p = d + off[0];
      for (int64_t i = 0; i < n; ++i) p[i * st[0]] = v;
    });
  });
  return {dst};
}

ZENITH_REGISTER_KERNEL(copy, CPU, copy_kernel);
ZENITH_REGISTER_KERNEL(copy_, CPU, copy_inplace_kernel);
ZENITH_REGISTER_KERNEL(fill_, CPU, fill_kernel);

}  // namespace
}  // namespace zenith::cpu
