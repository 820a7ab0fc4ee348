// CPU sum and variance. sum walks x's own strides: when the reduced dims are innermost it sums
// contiguous rows, when a kept dim is innermost (bias gradients: [N, C] over N) it adds whole
// rows into an accumulator block; it copies only for layouts that are neither.
#include <numeric>

#include "backend/cpu/loops.h"
#include "core/dispatch.h"

namespace zenith::cpu {
namespace {

// Sums are accumulated in blocks of this many terms, then the block sums are added: the
// rounding error grows with (block + n / block) rather than n.
constexpr int64_t kSumBlock = 1024;

// Row-major walk over the offsets of a strided index space, starting anywhere.
class OffsetWalker {
 public:
  OffsetWalker(const Shape& sizes, const Shape& strides, int64_t start = 0)
      : sizes_(sizes), strides_(strides), index_(sizes.size(), 0) {
    for (int64_t d = int64_t(sizes_.size()) - 1; d >= 0; --d) {
      index_[size_t(d)] = start % sizes_[size_t(d)];
      start /= sizes_[size_t(d)];
      offset_ += index_[size_t(d)] * strides_[size_t(d)];
    }
  }
  int64_t offset() const { return offset_; }
  void next() {
    for (int64_t d = int64_t(sizes_.size()) - 1; d >= 0; --d) {
      size_t i = size_t(d);
      offset_ += strides_[i];
      if (++index_[i] < sizes_[i]) return;
      offset_ -= index_[i] * strides_[i];
      index_[i] = 0;
    }
  }

 private:
  const Shape& sizes_;
  const Shape& strides_;
  Shape index_;
  int64_t offset_ = 0;
};

// x's dims split into kept and reduced ones (each in x's order), size-1 dims dropped and
// neighbours of one kind that are adjacent in memory merged.
struct ReducePlan {
  Shape kept_sizes, kept_strides, red_sizes, red_strides;
};

ReducePlan make_plan(const Tensor& x, const std::vector<int64_t>& dims) {
  std::vector<bool> reduced(size_t(x.dim()), false);
  for (auto d : dims) reduced[size_t(d)] = true;
  ReducePlan p;
  int last_kind = -1;  // 0 kept, 1 reduced
  for (int64_t d = 0; d < x.dim(); ++d) {
    int64_t size = x.shape()[size_t(d)], stride = x.strides()[size_t(d)];
    if (size == 1) continue;
    int kind = reduced[size_t(d)] ? 1 : 0;
    Shape& sizes = kind ? p.red_sizes : p.kept_sizes;
    Shape& strides = kind ? p.red_strides : p.kept_strides;
    if (kind == last_kind && strides.back() == stride * size) {
      sizes.back() *= size;
      strides.back() = stride;
    } else {
      sizes.push_back(size);
      strides.push_back(stride);
    }
    last_kind = kind;
  }
  return p;
}

template <typename Acc, typename T>
inline Acc row_sum(const T* q, int64_t n) {
  Acc total = 0;
  for (int64_t b = 0; b < n; b += kSumBlock) {
    int64_t e = std::min(n, b + kSumBlock);
    Acc s = 0;
    if constexpr (std::is_same_v<T, Acc>) {
#pragma omp simd reduction(+ : s)
      for (int64_t i = b; i < e; ++i) s += q[i];
    } else {
      for (int64_t i = b; i < e; ++i) s += Acc(load(q[i]));
    }
    total += s;
  }
  return total;
}

// Reduced dims innermost, the last one contiguous: out[o] = sum of rows of length L.
// N_out outputs, R outer reduced rows each, L contiguous elements per row.
template <typename T, typename Acc, typename O>
void sum_rows(const T* x, O* out, const ReducePlan& p) {
  const int64_t n_out = shape_numel(p.kept_sizes);
  const int64_t len = p.red_sizes.back();
  Shape outer_sizes(p.red_sizes.begin(), p.red_sizes.end() - 1);
  Shape outer_strides(p.red_strides.begin(), p.red_strides.end() - 1);
  const int64_t n_rows = shape_numel(outer_sizes);
  if (n_out == 1) {
    // One output: split the rows (or the single row) across threads, then combine.
    std::vector<Acc> part(size_t(omp_get_max_threads()), Acc(0));
    if (n_rows == 1) {
      parallel_for(len, kGrain, [&](int64_t b, int64_t e) {
        part[size_t(omp_get_thread_num())] += row_sum<Acc>(x + b, e - b);
      });
    } else {
      parallel_for(n_rows, std::max<int64_t>(1, kGrain / len), [&](int64_t b, int64_t e) {
        OffsetWalker r(outer_sizes, outer_strides, b);
        Acc s = 0;
        for (int64_t i = b; i < e; ++i, r.next()) s += row_sum<Acc>(x + r.offset(), len);
        part[size_t(omp_get_thread_num())] += s;
      });
    }
    Acc s = 0;
    for (auto v : part) s += v;
    out[0] = store<O>(s);
    return;
  }
  parallel_for(n_out, std::max<int64_t>(1, kGrain / (len * n_rows)), [&](int64_t b, int64_t e) {
    OffsetWalker o(p.kept_sizes, p.kept_strides, b);
    for (int64_t i = b; i < e; ++i, o.next()) {
      OffsetWalker r(outer_sizes, outer_strides);
      Acc s = 0;
      for (int64_t k = 0; k < n_rows; ++k, r.next())
        s += row_sum<Acc>(x + o.offset() + r.offset(), len);
      out[i] = store<O>(s);
    }
  });
}

// acc[0, n) += x[0, n)
template <typename T, typename Acc>
inline void add_row(Acc* acc, const T* x, int64_t n) {
  if constexpr (std::is_same_v<T, Acc>) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) acc[j] += x[j];
  } else {
    for (int64_t j = 0; j < n; ++j) acc[j] += Acc(load(x[j]));
  }
}

// A kept dim innermost and contiguous: out[p, k] = sum over reduced rows r of x[p, r, k].
// P outer kept positions, K contiguous kept elements, R reduced rows; K is cut in blocks.
template <typename T, typename Acc, typename O>
void sum_columns(const T* x, O* out, const ReducePlan& p) {
  constexpr int64_t kBlock = 512;
  const int64_t k_len = p.kept_sizes.back();
  Shape outer_sizes(p.kept_sizes.begin(), p.kept_sizes.end() - 1);
  Shape outer_strides(p.kept_strides.begin(), p.kept_strides.end() - 1);
  const int64_t n_outer = shape_numel(outer_sizes);
  const int64_t n_blocks = (k_len + kBlock - 1) / kBlock;
  const int64_t n_rows = shape_numel(p.red_sizes);
  const int64_t n_items = n_outer * n_blocks;
  const int threads = omp_get_max_threads();

  // Sums rows [r0, r1) of item `item` into acc (zeroed here), two-level for accuracy.
  auto sum_item = [&](int64_t item, int64_t r0, int64_t r1, Acc* acc) {
    int64_t outer = item / n_blocks, k0 = (item % n_blocks) * kBlock;
    int64_t n = std::min(kBlock, k_len - k0);
    OffsetWalker po(outer_sizes, outer_strides, outer);
    const T* base = x + po.offset() + k0;
    Acc block[kBlock];
    std::fill(acc, acc + n, Acc(0));
    OffsetWalker r(p.red_sizes, p.red_strides, r0);
    for (int64_t rb = r0; rb < r1; rb += kSumBlock) {
      int64_t re = std::min(r1, rb + kSumBlock);
      std::fill(block, block + n, Acc(0));
      for (int64_t i = rb; i < re; ++i, r.next()) add_row(block, base + r.offset(), n);
      add_row(acc, block, n);
    }
    return n;
  };
  auto out_index = [&](int64_t item) {
    return (item / n_blocks) * k_len + (item % n_blocks) * kBlock;
  };

  if (n_items >= threads || n_items * n_rows * std::min(k_len, kBlock) < kGrain) {
    parallel_for(n_items, std::max<int64_t>(1, kGrain / (n_rows * std::min(k_len, kBlock))),
                 [&](int64_t b, int64_t e) {
                   Acc acc[kBlock];
                   for (int64_t item = b; item < e; ++item) {
                     int64_t n = sum_item(item, 0, n_rows, acc);
                     O* o = out + out_index(item);
                     for (int64_t j = 0; j < n; ++j) o[j] = store<O>(acc[j]);
                   }
                 });
    return;
  }
  // Few items, many rows (e.g. [N, 64] over N): split the rows, then add the partial blocks.
  std::vector<Acc> part(size_t(threads * n_items * kBlock), Acc(0));
  parallel_for(n_rows, std::max<int64_t>(1, kGrain / std::min(k_len, kBlock)),
               [&](int64_t b, int64_t e) {
                 Acc* mine = part.data() + size_t(omp_get_thread_num()) * n_items * kBlock;
                 for (int64_t item = 0; item < n_items; ++item)
                   sum_item(item, b, e, mine + item * kBlock);
               });
  for (int64_t item = 0; item < n_items; ++item) {
    int64_t n = std::min(kBlock, k_len - (item % n_blocks) * kBlock);
    O* o = out + out_index(item);
    for (int64_t j = 0; j < n; ++j) {
      Acc s = 0;
      for (int t = 0; t < threads; ++t) s += part[size_t((t * n_items + item) * kBlock + j)];
      o[j] = store<O>(s);
    }
  }
}

// sum(x; dims, out_shape): dims sorted and unique; integers and bools sum to int64.
std::vector<Tensor> sum_kernel(const std::vector<Tensor>& in, const ReduceAttrs& attrs) {
  Tensor x = in[0];
  const auto& dims = attrs.dims;
  const Shape& out_shape = attrs.out_shape;
  DType out_dtype = is_floating(x.dtype()) ? x.dtype() : DType::i64;
  if (x.numel() == 0) return {Tensor::zeros(out_shape, out_dtype, x.device())};
  Tensor out = Tensor::empty(out_shape, out_dtype, x.device());
  ReducePlan p = make_plan(x, dims);
  if (p.red_sizes.empty()) {  // only size-1 dims reduced: a copy
    out.copy_(x.reshape(out_shape));
    return {out};
  }
  bool rows = p.red_strides.back() == 1;
  bool columns = !p.kept_strides.empty() && p.kept_strides.back() == 1;
  if (!rows && !columns) {
    x = x.contiguous();
    p = make_plan(x, dims);
    rows = p.red_strides.back() == 1;
  }
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using Acc = std::conditional_t<std::is_floating_point_v<compute_t<T>>, compute_t<T>, int64_t>;
    using O = std::conditional_t<std::is_floating_point_v<compute_t<T>>, T, int64_t>;
    if (rows)
      sum_rows<T, Acc, O>(x.data<T>(), out.data<O>(), p);
    else
      sum_columns<T, Acc, O>(x.data<T>(), out.data<O>(), p);
  });
  return {out};
}

// var(x; dims, correction, out_shape): two passes per output (mean, then squared deviations)
// over a copy with the reduced dims moved innermost.
std::vector<Tensor> var_kernel(const std::vector<Tensor>& in, const VarAttrs& attrs) {
  const Tensor& x = in[0];
  const auto& dims = attrs.dims;
  const Shape& out_shape = attrs.out_shape;
  const int64_t correction = attrs.correction;
  std::vector<int64_t> order;
  std::vector<bool> reduced(size_t(x.dim()), false);
  for (auto d : dims) reduced[size_t(d)] = true;
  int64_t n_out = 1, cols = 1;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (!reduced[size_t(d)]) {
      order.push_back(d);
      n_out *= x.shape()[size_t(d)];
    }
  for (int64_t d = 0; d < x.dim(); ++d)
    if (reduced[size_t(d)]) {
      order.push_back(d);
      cols *= x.shape()[size_t(d)];
    }
  Tensor data = x.permute(order).contiguous();
  Tensor out = Tensor::empty(out_shape, x.dtype(), x.device());
  visit_float(x.dtype() == DType::f64 ? DType::f64 : DType::f32, "var", [&](auto tag) {
    using Acc = decltype(tag);
    visit_dtype(x.dtype(), [&](auto ttag) {
      using T = decltype(ttag);
      if constexpr (std::is_floating_point_v<compute_t<T>>) {
        const T* p = data.data<T>();
        T* o = out.data<T>();
        const Acc denom = Acc(cols - correction);
        parallel_for(n_out, std::max<int64_t>(1, kGrain / std::max<int64_t>(cols, 1)),
                     [&](int64_t b, int64_t e) {
                       for (int64_t r = b; r < e; ++r) {
                         const T* q = p + r * cols;
                         Acc mean = row_sum<Acc>(q, cols) / Acc(cols);
                         Acc ss = 0;
                         for (int64_t i = 0; i < cols; ++i) {
                           Acc dev = Acc(load(q[i])) - mean;
                           ss += dev * dev;
                         }
                         o[r] = store<T>(ss / denom);
                       }
                     });
      }
    });
  });
  return {out};
}

ZENITH_REGISTER_KERNEL(sum, CPU, sum_kernel);
ZENITH_REGISTER_KERNEL(var, CPU, var_kernel);

}  // namespace
}  // namespace zenith::cpu
