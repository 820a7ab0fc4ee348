// CPU max/min reductions: over one dim with the arg index (max_dim, min_dim), and over all
// elements (max_all, min_all). NaN wins, as in PyTorch; ties keep the first index.
#include "backend/cpu/loops.h"
#include "core/dispatch.h"

namespace zenith::cpu {
namespace {

template <typename C>
inline bool is_nan(C v) {
  if constexpr (std::is_floating_point_v<C>)
    return v != v;
  else
    return false;
}

// Whether v replaces the current best: strictly better, or the first NaN.
template <bool kMax, typename C>
inline bool better(C v, C best) {
  if (is_nan(best)) return false;
  if (is_nan(v)) return true;
  if constexpr (kMax)
    return v > best;
  else
    return v < best;
}

// x viewed as [outer, R, inner] (contiguous): values and indices [outer, inner].
template <bool kMax>
std::vector<Tensor> minmax_dim_kernel(const std::vector<Tensor>& in, const ReduceDimAttrs& attrs) {
  Tensor x = in[0].contiguous();
  const int64_t dim = attrs.dim;
  const Shape& out_shape = attrs.out_shape;
  int64_t outer = 1, inner = 1;
  const int64_t r_len = x.dim() == 0 ? 1 : x.shape()[size_t(dim)];
  for (int64_t d = 0; d < dim; ++d) outer *= x.shape()[size_t(d)];
  for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= x.shape()[size_t(d)];
  Tensor values = Tensor::empty(out_shape, x.dtype(), x.device());
  Tensor indices = Tensor::empty(out_shape, DType::i64, x.device());
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* p = x.data<T>();
    T* vo = values.data<T>();
    int64_t* io = indices.data<int64_t>();
    if (inner == 1) {
      // Rows of R contiguous elements.
      parallel_for(outer, std::max<int64_t>(1, kGrain / r_len), [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o) {
          const T* q = p + o * r_len;
          C best = load(q[0]);
          int64_t arg = 0;
          for (int64_t r = 1; r < r_len; ++r) {
            C v = load(q[r]);
            if (better<kMax, C>(v, best)) {
              best = v;
              arg = r;
            }
          }
          vo[o] = store<T>(best);
          io[o] = arg;
        }
      });
      return;
    }
    // Columns: compare whole rows of `inner` elements at a time.
    parallel_for(outer, std::max<int64_t>(1, kGrain / (r_len * inner)), [&](int64_t b, int64_t e) {
      std::vector<C> best(static_cast<size_t>(inner));
      for (int64_t o = b; o < e; ++o) {
        const T* q = p + o * r_len * inner;
        int64_t* arg = io + o * inner;
        for (int64_t j = 0; j < inner; ++j) {
          best[size_t(j)] = load(q[j]);
          arg[j] = 0;
        }
        for (int64_t r = 1; r < r_len; ++r) {
          const T* row = q + r * inner;
          for (int64_t j = 0; j < inner; ++j) {
            C v = load(row[j]);
            if (better<kMax, C>(v, best[size_t(j)])) {
              best[size_t(j)] = v;
              arg[j] = r;
            }
          }
        }
        for (int64_t j = 0; j < inner; ++j) vo[o * inner + j] = store<T>(C(best[size_t(j)]));
      }
    });
  });
  return {values, indices};
}

// The max (min) of all elements as a 0-d tensor.
template <bool kMax>
std::vector<Tensor> minmax_all_kernel(const std::vector<Tensor>& in, const NoAttrs&) {
  Tensor x = in[0].contiguous();
  Tensor out = Tensor::empty({}, x.dtype(), x.device());
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* p = x.data<T>();
    const int threads = omp_get_max_threads();
    std::vector<C> part(size_t(threads), load(p[0]));
    parallel_for(x.numel(), kGrain, [&](int64_t b, int64_t e) {
      C best = load(p[b]);
      for (int64_t i = b + 1; i < e; ++i) {
        C v = load(p[i]);
        if (better<kMax, C>(v, best)) best = v;
      }
      part[size_t(omp_get_thread_num())] = best;
    });
    C best = part[0];
    for (auto v : part)
      if (better<kMax, C>(v, best)) best = v;
    out.data<T>()[0] = store<T>(best);
  });
  return {out};
}

ZENITH_REGISTER_KERNEL(max_dim, CPU, minmax_dim_kernel<true>);
ZENITH_REGISTER_KERNEL(min_dim, CPU, minmax_dim_kernel<false>);
ZENITH_REGISTER_KERNEL(max_all, CPU, minmax_all_kernel<true>);
ZENITH_REGISTER_KERNEL(min_all, CPU, minmax_all_kernel<false>);

}  // namespace
}  // namespace zenith::cpu
