#include "distributed/reduce.h"

#include <algorithm>
#include <cstdint>

#include "zenith/error.h"

namespace zenith::distributed {

namespace {

struct Sum {
  template <typename T>
  T operator()(T a, T b) const {
    return a + b;
  }
};
struct Max {
  template <typename T>
  T operator()(T a, T b) const {
    return std::max(a, b);
  }
};
struct Min {
  template <typename T>
  T operator()(T a, T b) const {
    return std::min(a, b);
  }
};

// One plain loop per (type, op); the compiler vectorises it (dst may alias a, so no restrict).
template <typename T, typename F>
void apply(void* dst, const void* a, const void* b, size_t n, F f) {
  T* d = static_cast<T*>(dst);
  const T* pa = static_cast<const T*>(a);
  const T* pb = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) d[i] = f(pa[i], pb[i]);
}

template <typename T>
void reduce_typed(void* dst, const void* a, const void* b, size_t n, communication::ReduceOp op) {
  switch (op) {
    case communication::ReduceOp::SUM:
    case communication::ReduceOp::AVG:
      return apply<T>(dst, a, b, n, Sum{});
    case communication::ReduceOp::MAX:
      return apply<T>(dst, a, b, n, Max{});
    case communication::ReduceOp::MIN:
      return apply<T>(dst, a, b, n, Min{});
  }
}

}  // namespace

bool is_supported_dtype(DType dtype) {
  return dtype == DType::f32 || dtype == DType::f64 || dtype == DType::i32 || dtype == DType::i64;
}

void reduce(void* dst, const void* a, const void* b, size_t count, DType dtype,
            communication::ReduceOp op) {
  switch (dtype) {
    case DType::f32:
      return reduce_typed<float>(dst, a, b, count, op);
    case DType::f64:
      return reduce_typed<double>(dst, a, b, count, op);
    case DType::i32:
      return reduce_typed<int32_t>(dst, a, b, count, op);
    case DType::i64:
      return reduce_typed<int64_t>(dst, a, b, count, op);
    default:
      ZENITH_FAIL("[communication] cannot reduce ", dtype_name(dtype), " tensors");
  }
}

void divide(void* data, size_t count, DType dtype, int divisor) {
  if (dtype == DType::f32) {
    float* p = static_cast<float*>(data);
    for (size_t i = 0; i < count; ++i) p[i] /= float(divisor);
  } else if (dtype == DType::f64) {
    double* p = static_cast<double*>(data);
    for (size_t i = 0; i < count; ++i) p[i] /= double(divisor);
  } else {
    ZENITH_FAIL("[communication] ReduceOp::AVG needs a floating-point tensor, got ",
                dtype_name(dtype));
  }
}

}  // namespace zenith::distributed
