// Generic CPU loops: dtype dispatch, parallel_for over one OpenMP pool, and a strided N-d loop
// that coalesces dimensions and hands contiguous-or-strided inner rows to a functor.
#pragma once

#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/shape.h"
#include "zenith/tensor.h"

namespace zenith::cpu {

// ---- dtype dispatch: f(T{}) with T the element type of `dtype`.
template <typename F>
decltype(auto) visit_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f32:
      return f(float{});
    case DType::f64:
      return f(double{});
    case DType::f16:
      return f(Half{});
    case DType::bf16:
      return f(BFloat16{});
    case DType::i32:
      return f(int32_t{});
    case DType::i64:
      return f(int64_t{});
    case DType::u8:
      return f(uint8_t{});
    case DType::b8:
      return f(bool{});
  }
  ZENITH_FAIL("[cpu] bad dtype");
}

// Only float32 and float64 (the compute types of float kernels); `op` names the caller.
template <typename F>
decltype(auto) visit_float(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::f32:
      return f(float{});
    case DType::f64:
      return f(double{});
    default:
      ZENITH_FAIL("[", op, "] expected float32 or float64, got ", dtype_name(dtype));
  }
}

// The type arithmetic on T is carried out in: 16-bit floats compute in float.
template <typename T>
struct ComputeOf {
  using type = T;
};
template <>
struct ComputeOf<Half> {
  using type = float;
};
template <>
struct ComputeOf<BFloat16> {
  using type = float;
};
template <typename T>
using compute_t = typename ComputeOf<T>::type;

template <typename T>
inline compute_t<T> load(const T& v) {
  return v;
}
template <>
inline float load<Half>(const Half& v) {
  return half_to_float(v.bits);
}
template <>
inline float load<BFloat16>(const BFloat16& v) {
  return bf16_to_float(v.bits);
}

template <typename T, typename C>
inline T store(C v) {
  if constexpr (std::is_same_v<T, Half>)
    return Half{float_to_half(float(v))};
  else if constexpr (std::is_same_v<T, BFloat16>)
    return BFloat16{float_to_bf16(float(v))};
  else if constexpr (std::is_same_v<T, bool>)
    return v != C(0);
  else
    return static_cast<T>(v);
}

// ---- parallelism
inline constexpr int64_t kGrain = 32768;  // elements below which a loop runs on one thread

// f(begin, end) over [0, n) split across the pool; serial when n < grain.
template <typename F>
void parallel_for(int64_t n, int64_t grain, F&& f) {
  if (n <= 0) return;
  int threads = omp_get_max_threads();
  if (n < grain || threads == 1 || omp_in_parallel()) {
    f(int64_t(0), n);
    return;
  }
  int64_t chunks = std::min<int64_t>(threads, (n + grain - 1) / grain);
#pragma omp parallel num_threads(int(chunks))
  {
    int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    int64_t begin = n * t / nt, end = n * (t + 1) / nt;
    if (begin < end) f(begin, end);
  }
}

// ---- strided N-d loops over K operands sharing one shape (strides 0 for broadcast dims).
template <int K>
struct StridedLoop {
  Shape shape;
  std::array<Shape, K> strides;

  StridedLoop(const Shape& s, const std::array<Shape, K>& st) : shape(s), strides(st) {
    coalesce();
  }

  // Merges adjacent dims that are contiguous with each other in every operand; drops size-1 dims.
  void coalesce() {
    Shape ns;
    std::array<Shape, K> nst;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] == 1) continue;
      if (!ns.empty()) {
        bool mergeable = true;
        for (int k = 0; k < K; ++k)
          if (nst[k].back() != strides[k][d] * shape[d]) mergeable = false;
        if (mergeable) {
          ns.back() *= shape[d];
          for (int k = 0; k < K; ++k) nst[k].back() = strides[k][d];
          continue;
        }
      }
      ns.push_back(shape[d]);
      for (int k = 0; k < K; ++k) nst[k].push_back(strides[k][d]);
    }
    if (ns.empty()) {
      ns.push_back(1);
      for (int k = 0; k < K; ++k) nst[k].push_back(0);
    }
    shape = ns;
    strides = nst;
  }

  // f(offsets[K], n, inner_strides[K]) for every inner row, rows in parallel. With fewer rows
  // than threads (a contiguous tensor coalesces to one row) long rows are cut into pieces too,
  // unless split_rows is false (callers whose rows must stay whole on one thread).
  template <typename F>
  void run(F&& f, int64_t grain = kGrain, bool split_rows = true) const {
    const int64_t ndim = int64_t(shape.size());
    const int64_t inner = shape.back();
    int64_t outer = 1;
    for (int64_t d = 0; d + 1 < ndim; ++d) outer *= shape[d];
    std::array<int64_t, K> inner_strides;
    for (int k = 0; k < K; ++k) inner_strides[k] = strides[k].back();
    const int threads = omp_get_max_threads();
    int64_t pieces = 1;
    if (split_rows && outer < threads && inner >= 2 * grain)
      pieces = std::min<int64_t>(threads, inner / grain);
    const int64_t piece = (inner + pieces - 1) / pieces;
    int64_t item_grain = std::max<int64_t>(1, grain / std::max<int64_t>(piece, 1));
    parallel_for(outer * pieces, item_grain, [&](int64_t begin, int64_t end) {
      for (int64_t item = begin; item < end; ++item) {
        const int64_t row = item / pieces, start = (item % pieces) * piece;
        std::array<int64_t, K> off{};
        int64_t r = row;
        for (int64_t d = ndim - 2; d >= 0; --d) {
          int64_t i = r % shape[d];
          r /= shape[d];
          for (int k = 0; k < K; ++k) off[k] += i * strides[k][d];
        }
        for (int k = 0; k < K; ++k) off[k] += start * inner_strides[k];
        f(off, std::min(inner, start + piece) - start, inner_strides);
      }
    });
  }
};

// Strides of `t` viewed as broadcast to `shape` (0 where t's size is 1 or missing).
Shape broadcast_strides(const Tensor& t, const Shape& shape);

}  // namespace zenith::cpu
