// Shape rules shared by ops (their decompositions) and kernels: broadcasting and pooling
// windows (shape_str, shape_numel, contiguous_strides are in zenith/tensor.h).
#pragma once

#include <algorithm>

#include "zenith/tensor.h"

namespace zenith {

// The broadcast shape of a and b (numpy rules); `op` names the caller in the error.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// The input cells [begin, end) that output cell o of a pooling reads along one dim of `size`;
// padded counts the window's cells including padding (the count_include_pad divisor).
struct PoolWindow {
  int64_t begin, end, padded;
};
// Max/avg pooling: kernel k, stride, `pad` on both sides (the window stops at the padding's end).
inline PoolWindow pool_window(int64_t o, int64_t k, int64_t stride, int64_t pad, int64_t size) {
  const int64_t start = o * stride - pad;
  const int64_t stop = std::min(start + k, size + pad);
  return {std::max<int64_t>(start, 0), std::min(stop, size), stop - start};
}
// Adaptive pooling from `size` to `out` cells: [floor(o size / out), ceil((o + 1) size / out)).
inline PoolWindow adaptive_pool_window(int64_t o, int64_t size, int64_t out) {
  const int64_t begin = o * size / out, end = ((o + 1) * size + out - 1) / out;
  return {begin, end, end - begin};
}

}  // namespace zenith
