// CPU reductions. Reduced dims are moved last and made contiguous, so every reduction is a
// row reduction over contiguous memory.
#include <numeric>

#include "backend/cpu/loops.h"
#include "core/dispatch.h"

namespace zenith::cpu {
namespace {

// x viewed as [rows, cols] with the reduced dims (sorted, unique) as the contiguous cols.
struct Rows {
  Tensor data;
  int64_t rows = 1, cols = 1;
};

Rows as_rows(const Tensor& x, const std::vector<int64_t>& dims) {
  std::vector<int64_t> order;
  std::vector<bool> reduced(size_t(x.dim()), false);
  for (auto d : dims) reduced[size_t(d)] = true;
  Rows r;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (!reduced[size_t(d)]) {
      order.push_back(d);
      r.rows *= x.shape()[size_t(d)];
    }
  for (int64_t d = 0; d < x.dim(); ++d)
    if (reduced[size_t(d)]) {
      order.push_back(d);
      r.cols *= x.shape()[size_t(d)];
    }
  r.data = x.permute(order).contiguous();
  return r;
}

// sum(x; dims, keepdim) with the output shape computed by the op.
std::vector<Tensor> sum_kernel(const std::vector<Tensor>& in, const dispatch::Attrs& attrs) {
  const Tensor& x = in[0];
  const auto& dims = attrs.get<std::vector<int64_t>>("dims");
  const auto& out_shape = attrs.get<std::vector<int64_t>>("out_shape");
  DType out_dtype = is_floating(x.dtype()) ? x.dtype() : DType::i64;
  Tensor out = Tensor::empty(out_shape, out_dtype, x.device());
  Rows r = as_rows(x, dims);
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using Acc = std::conditional_t<std::is_floating_point_v<compute_t<T>>, compute_t<T>, int64_t>;
    using O = std::conditional_t<std::is_floating_point_v<compute_t<T>>, T, int64_t>;
    const T* p = r.data.template data<T>();
    O* o = out.template data<O>();
    const int64_t cols = r.cols;
    if (r.rows == 1) {
      // One long row: split it across threads, then combine the partial sums.
      int threads = omp_get_max_threads();
      std::vector<Acc> part(size_t(threads), Acc(0));
      parallel_for(cols, kGrain, [&](int64_t b, int64_t e) {
        Acc s = 0;
        for (int64_t i = b; i < e; ++i) s += Acc(load(p[i]));
        part[size_t(omp_get_thread_num())] += s;
      });
      Acc s = 0;
      for (auto v : part) s += v;
      o[0] = store<O>(s);
      return;
    }
    parallel_for(r.rows, std::max<int64_t>(1, kGrain / std::max<int64_t>(cols, 1)),
                 [&](int64_t b, int64_t e) {
                   for (int64_t row = b; row < e; ++row) {
                     const T* q = p + row * cols;
                     Acc s = 0;
                     if constexpr (std::is_same_v<T, Acc>) {
#pragma omp simd reduction(+ : s)
                       for (int64_t i = 0; i < cols; ++i) s += q[i];
                     } else {
                       for (int64_t i = 0; i < cols; ++i) s += Acc(load(q[i]));
                     }
                     o[row] = store<O>(s);
                   }
                 });
  });
  return {out};
}

ZENITH_REGISTER_KERNEL("sum", CPU, sum_kernel);

}  // namespace
}  // namespace zenith::cpu
