// Dropout kernel: a keep-mask from the global generator (one 32-bit uniform per element, drawn
// in order so a seed fixes the mask), applied with inverted scaling.
#include <cstdint>

#include "backend/cpu/loops.h"
#include "core/dispatch.h"
#include "zenith/random.h"

namespace zenith::cpu {
namespace {

// dropout(x; p) -> {y, mask}: mask = 1/(1-p) where kept, 0 where dropped; y = x * mask.
std::vector<Tensor> dropout_kernel(const std::vector<Tensor>& in, const DropoutAttrs& attrs) {
  Tensor x = in[0].contiguous();
  const double p = attrs.p;
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  Tensor mask = Tensor::empty(x.shape(), x.dtype());
  const int64_t n = x.numel();
  // Keep when u >= p, u uniform on [0, 1) in steps of 2^-32.
  const uint64_t threshold = uint64_t(p * 4294967296.0);
  std::vector<uint8_t> keep(static_cast<size_t>(n));
  auto& engine = default_generator().engine();
  for (int64_t i = 0; i + 1 < n; i += 2) {
    uint64_t r = engine();
    keep[size_t(i)] = (r & 0xffffffffu) >= threshold;
    keep[size_t(i + 1)] = (r >> 32) >= threshold;
  }
  if (n % 2) keep[size_t(n - 1)] = (engine() & 0xffffffffu) >= threshold;
  visit_float(x.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    const T scale = p < 1 ? T(1.0 / (1.0 - p)) : T(0);
    const T* px = x.data<T>();
    T* py = y.data<T>();
    T* pm = mask.data<T>();
    const uint8_t* pk = keep.data();
    parallel_for(n, kGrain, [&](int64_t begin, int64_t end) {
#pragma omp simd
      for (int64_t i = begin; i < end; ++i) {
        T m = pk[i] ? scale : T(0);
        pm[i] = m;
        py[i] = px[i] * m;
      }
    });
  });
  return {y, mask};
}

ZENITH_REGISTER_KERNEL(dropout, CPU, dropout_kernel);

}  // namespace
}  // namespace zenith::cpu
