// Strides for broadcasting an operand inside the loops.
#include "backend/cpu/loops.h"

namespace zenith::cpu {

Shape broadcast_strides(const Tensor& t, const Shape& shape) {
  const int64_t nd = int64_t(shape.size()), td = t.dim();
  Shape st(size_t(nd), 0);
  for (int64_t i = 0; i < td; ++i) {
    int64_t d = nd - td + i;
    st[size_t(d)] = t.shape()[size_t(i)] == 1 ? 0 : t.strides()[size_t(i)];
  }
  return st;
}

}  // namespace zenith::cpu
