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

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    ZENITH_CHECK(da == db || da == 1 || db == 1, "[", op, "] shapes ", shape_str(a), " and ",
                 shape_str(b), " cannot be broadcast together");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace zenith::cpu
