// Rotary embedding kernels (the ops of src/ops/rotary.cpp): one pass over rows of D elements,
// x strided (q and k arrive as [B, T, H, D] buffers viewed as [B, H, T, D]), cos/sin broadcast
// over batch and heads, the output contiguous. D = 2 h; rotate_half(x) = [-x2, x1].
#include "backend/cpu/loops.h"
#include "core/dispatch.h"

namespace zenith::cpu {
namespace {

// Rows of a tensor of up to 4 dims as [R0, R1, R2] x D with each operand's row strides
// (0 where it broadcasts), the last dim unit-stride.
struct RowGrid {
  int64_t n[3] = {1, 1, 1};
  int64_t d = 0;
  std::array<std::array<int64_t, 3>, 4> st{};  // per operand

  RowGrid(const Shape& shape, const std::vector<Tensor>& operands) {
    const int64_t nd = int64_t(shape.size());
    d = shape.back();
    for (int64_t i = 0; i + 1 < nd; ++i) n[3 - (nd - 1) + i] = shape[size_t(i)];
    for (size_t k = 0; k < operands.size(); ++k) {
      Shape s = broadcast_strides(operands[k], shape);
      for (int64_t i = 0; i + 1 < nd; ++i) st[k][size_t(3 - (nd - 1) + i)] = s[size_t(i)];
    }
  }
  int64_t rows() const { return n[0] * n[1] * n[2]; }
  int64_t offset(size_t k, int64_t row) const {
    const int64_t i2 = row % n[2], i1 = (row / n[2]) % n[1], i0 = row / (n[1] * n[2]);
    return i0 * st[k][0] + i1 * st[k][1] + i2 * st[k][2];
  }
};

Tensor unit_last(const Tensor& t) { return t.strides().back() == 1 ? t : t.contiguous(); }

// out = x cos + rotate_half(x) sin
template <typename T>
void rotary_rows(const RowGrid& g, T* out, const T* x, const T* c, const T* s) {
  const int64_t d = g.d, h = d / 2;
  parallel_for(g.rows(), std::max<int64_t>(1, kGrain / std::max<int64_t>(d, 1)),
               [&](int64_t begin, int64_t end) {
                 for (int64_t r = begin; r < end; ++r) {
                   T* o = out + r * d;
                   const T* xr = x + g.offset(0, r);
                   const T* cr = c + g.offset(1, r);
                   const T* sr = s + g.offset(2, r);
#pragma omp simd
                   for (int64_t j = 0; j < h; ++j) o[j] = xr[j] * cr[j] - xr[j + h] * sr[j];
#pragma omp simd
                   for (int64_t j = h; j < d; ++j) o[j] = xr[j] * cr[j] + xr[j - h] * sr[j];
                 }
               });
}

// dx = dy cos + rotate_half^T(dy sin), rotate_half^T(g) = [g2, -g1]
template <typename T>
void rotary_backward_rows(const RowGrid& g, T* dx, const T* dy, const T* c, const T* s) {
  const int64_t d = g.d, h = d / 2;
  parallel_for(g.rows(), std::max<int64_t>(1, kGrain / std::max<int64_t>(d, 1)),
               [&](int64_t begin, int64_t end) {
                 for (int64_t r = begin; r < end; ++r) {
                   T* o = dx + r * d;
                   const T* gr = dy + g.offset(0, r);
                   const T* cr = c + g.offset(1, r);
                   const T* sr = s + g.offset(2, r);
#pragma omp simd
                   for (int64_t j = 0; j < h; ++j) o[j] = gr[j] * cr[j] + gr[j + h] * sr[j + h];
#pragma omp simd
                   for (int64_t j = h; j < d; ++j) o[j] = gr[j] * cr[j] - gr[j - h] * sr[j - h];
                 }
               });
}

// (x or dy, cos, sin) -> x's shape, contiguous.
template <bool kBackward>
std::vector<Tensor> rotary_kernel(const std::vector<Tensor>& in, const NoAttrs&) {
  Tensor x = unit_last(in[0]), c = unit_last(in[1]), s = unit_last(in[2]);
  if (c.dtype() != x.dtype()) c = c.to(x.dtype());
  if (s.dtype() != x.dtype()) s = s.to(x.dtype());
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  RowGrid grid(x.shape(), {x, c, s});
  visit_float(
      x.dtype(), kBackward ? "rotary_embedding_backward" : "rotary_embedding", [&](auto tag) {
        using T = decltype(tag);
        if constexpr (kBackward)
          rotary_backward_rows<T>(grid, out.data<T>(), x.data<T>(), c.data<T>(), s.data<T>());
        else
          rotary_rows<T>(grid, out.data<T>(), x.data<T>(), c.data<T>(), s.data<T>());
      });
  return {out};
}

ZENITH_REGISTER_KERNEL(rotary_embedding, CPU, rotary_kernel<false>);
ZENITH_REGISTER_KERNEL(rotary_embedding_backward, CPU, rotary_kernel<true>);

}  // namespace
}  // namespace zenith::cpu
