#include "core/shape.h"

#include <algorithm>

namespace zenith {

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

}  // namespace zenith
