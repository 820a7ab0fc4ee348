// Batch norm on oneDNN channel-blocked float32 activations ([N][C/B][spatial][B], B = 8 or 16):
// one parallel region per call over channel blocks, the B channels of a block in SIMD lanes.
#include <cmath>

#include "backend/cpu/batch_norm.h"
#include "backend/cpu/elementwise_functors.h"
#include "backend/cpu/loops.h"
#include "backend/cpu/onednn.h"

namespace zenith::cpu {

int64_t channel_block(const Tensor& x) {
  if (!x.has_layout() || x.dim() < 2 || x.dtype() != DType::f32) return 0;
  const auto& m = onednn::desc_of(x).data;
  if (m.format_kind != dnnl_blocked || m.offset0 != 0) return 0;
  const auto& b = m.format_desc.blocking;
  if (b.inner_nblks != 1 || b.inner_idxs[0] != 1) return 0;
  const int64_t B = b.inner_blks[0];
  if ((B != 8 && B != 16) || m.padded_dims[1] != m.dims[1]) return 0;
  // Outer order N, C/B, then the spatial dims, densely packed.
  int64_t stride = B;
  for (int i = m.ndims - 1; i >= 2; --i) {
    if (b.strides[i] != stride) return 0;
    stride *= m.dims[i];
  }
  if (b.strides[1] != stride) return 0;
  return b.strides[0] == stride * (m.dims[1] / B) ? B : 0;
}

namespace {

// CB channel blocks; element (n, cb, s, lane) at ((n * CB + cb) * S + s) * B + lane.
template <int B>
void forward(const float* x, float* y, float* mean, float* var, const float* w, const float* b,
             const BnGeometry& g, bool training, double eps, bool relu) {
  const int64_t CB = g.C / B;
  parallel_for(CB, 1, [&](int64_t begin, int64_t end) {
    for (int64_t cb = begin; cb < end; ++cb) {
      float* m = mean + cb * B;
      float* v = var + cb * B;
      if (training) {  // two passes, per-sample partial sums in float, totals in double
        double sum[B] = {}, sq[B] = {};
        for (int64_t n = 0; n < g.N; ++n) {
          const float* p = x + (n * CB + cb) * g.S * B;
          float acc[B] = {};
          for (int64_t s = 0; s < g.S; ++s)
#pragma omp simd
            for (int l = 0; l < B; ++l) acc[l] += p[s * B + l];
          for (int l = 0; l < B; ++l) sum[l] += acc[l];
        }
        for (int l = 0; l < B; ++l) m[l] = float(sum[l] / double(g.count()));
        for (int64_t n = 0; n < g.N; ++n) {
          const float* p = x + (n * CB + cb) * g.S * B;
          float acc[B] = {};
          for (int64_t s = 0; s < g.S; ++s)
#pragma omp simd
            for (int l = 0; l < B; ++l) acc[l] += (p[s * B + l] - m[l]) * (p[s * B + l] - m[l]);
          for (int l = 0; l < B; ++l) sq[l] += acc[l];
        }
        for (int l = 0; l < B; ++l) v[l] = float(sq[l] / double(g.count()));
      }
      float scale[B], shift[B];
      for (int l = 0; l < B; ++l) {
        const int64_t c = cb * B + l;
        float rstd = float(1.0 / std::sqrt(double(v[l]) + eps));
        scale[l] = (w ? w[c] : 1.f) * rstd;
        shift[l] = (b ? b[c] : 0.f) - m[l] * scale[l];
      }
      for (int64_t n = 0; n < g.N; ++n) {
        const float* p = x + (n * CB + cb) * g.S * B;
        float* q = y + (n * CB + cb) * g.S * B;
        if (relu)
          for (int64_t s = 0; s < g.S; ++s)
#pragma omp simd
            for (int l = 0; l < B; ++l) q[s * B + l] = Relu{}(p[s * B + l] * scale[l] + shift[l]);
        else
          for (int64_t s = 0; s < g.S; ++s)
#pragma omp simd
            for (int l = 0; l < B; ++l) q[s * B + l] = p[s * B + l] * scale[l] + shift[l];
      }
    }
  });
}

// dy[i], or relu_backward(dy, y)[i] with batch_norm_relu's output y.
template <bool kRelu>
inline __attribute__((always_inline)) float masked_dy(const float* dy, const float* y, int64_t i) {
  if constexpr (kRelu)
    return ReluBackward{}(dy[i], y[i]);
  else
    return dy[i];
}

// dx = gamma * rstd * (dy - mean(dy) - xhat * mean(dy * xhat)) in training, gamma * rstd * dy
// in eval; dgamma = sum(dy * xhat), dbeta = sum(dy). With y (batch_norm_relu's output), dy is
// read as relu_backward(dy, y).
template <int B, bool kRelu>
void backward(const float* dy_in, const float* x, const float* mean, const float* var,
              const float* w, const float* y, float* dx, float* dw, float* db, const BnGeometry& g,
              bool training, double eps) {
  const int64_t CB = g.C / B;
  parallel_for(CB, 1, [&](int64_t begin, int64_t end) {
    for (int64_t cb = begin; cb < end; ++cb) {
      const float* m = mean + cb * B;
      float rstd[B];
      for (int l = 0; l < B; ++l) rstd[l] = float(1.0 / std::sqrt(double(var[cb * B + l]) + eps));
      double sum_dy[B] = {}, sum_dyx[B] = {};
      for (int64_t n = 0; n < g.N; ++n) {
        const int64_t at = (n * CB + cb) * g.S * B;
        const float* p = x + at;
        const float* d = dy_in + at;
        const float* yy = y ? y + at : nullptr;
        float a[B] = {}, c[B] = {};
        for (int64_t s = 0; s < g.S; ++s)
#pragma omp simd
          for (int l = 0; l < B; ++l) {
            const float di = masked_dy<kRelu>(d, yy, s * B + l);
            a[l] += di;
            c[l] += di * (p[s * B + l] - m[l]);
          }
        for (int l = 0; l < B; ++l) {
          sum_dy[l] += a[l];
          sum_dyx[l] += double(c[l]) * rstd[l];
        }
      }
      float k[B], mean_dy[B], mean_dyx[B];
      for (int l = 0; l < B; ++l) {
        const int64_t ch = cb * B + l;
        dw[ch] = float(sum_dyx[l]);
        db[ch] = float(sum_dy[l]);
        k[l] = (w ? w[ch] : 1.f) * rstd[l];
        mean_dy[l] = training ? float(sum_dy[l] / double(g.count())) : 0.f;
        mean_dyx[l] = training ? float(sum_dyx[l] / double(g.count())) * rstd[l] : 0.f;
      }
      for (int64_t n = 0; n < g.N; ++n) {
        const int64_t at = (n * CB + cb) * g.S * B;
        const float* p = x + at;
        const float* d = dy_in + at;
        const float* yy = y ? y + at : nullptr;
        float* o = dx + at;
        for (int64_t s = 0; s < g.S; ++s)
#pragma omp simd
          for (int l = 0; l < B; ++l)
            o[s * B + l] = k[l] * (masked_dy<kRelu>(d, yy, s * B + l) - mean_dy[l] -
                                   (p[s * B + l] - m[l]) * mean_dyx[l]);
      }
    }
  });
}

const float* data_or_null(const Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }

}  // namespace

std::vector<Tensor> bn_forward_blocked(const std::vector<Tensor>& in, bool training,
                                       double momentum, double eps, bool relu) {
  const Tensor& x = in[0];
  BnGeometry g(x.shape());
  Tensor y = onednn::empty_in(x.shape(), DType::f32, onednn::desc_of(x));
  Tensor mean = training ? Tensor::empty({g.C}, DType::f32) : in[3].contiguous();
  Tensor var = training ? Tensor::empty({g.C}, DType::f32) : in[4].contiguous();
  Tensor w = in[1].defined() ? in[1].contiguous() : Tensor();
  Tensor b = in[2].defined() ? in[2].contiguous() : Tensor();
  const float* px = flat_physical(x).data<float>();
  float* py = flat_physical(y).data<float>();
  auto run = [&](auto fn) {
    fn(px, py, mean.data<float>(), var.data<float>(), data_or_null(w), data_or_null(b), g, training,
       eps, relu);
  };
  if (channel_block(x) == 16)
    run(forward<16>);
  else
    run(forward<8>);
  if (training)
    update_running<float>(in[3], in[4], mean.data<float>(), var.data<float>(), g, momentum);
  return {y, mean, var};
}

std::vector<Tensor> bn_backward_blocked(const std::vector<Tensor>& in, bool training, double eps,
                                        const Tensor& relu_y) {
  const Tensor& x = in[1];
  BnGeometry g(x.shape());
  Tensor dy = is_layout(in[0]) && same_layout(in[0], x) ? in[0] : to_layout_of(in[0], x);
  Tensor w = in[2].defined() ? in[2].contiguous() : Tensor();
  Tensor mean = in[3].contiguous(), var = in[4].contiguous();
  Tensor dx = onednn::empty_in(x.shape(), DType::f32, onednn::desc_of(x));
  Tensor dw = Tensor::empty({g.C}, DType::f32), db = Tensor::empty({g.C}, DType::f32);
  Tensor y;
  if (relu_y.defined())
    y = is_layout(relu_y) && same_layout(relu_y, x) ? relu_y : to_layout_of(relu_y, x);
  auto run = [&](auto fn) {
    fn(flat_physical(dy).data<float>(), flat_physical(x).data<float>(), mean.data<float>(),
       var.data<float>(), data_or_null(w), y.defined() ? flat_physical(y).data<float>() : nullptr,
       flat_physical(dx).data<float>(), dw.data<float>(), db.data<float>(), g, training, eps);
  };
  const bool relu = y.defined();
  if (channel_block(x) == 16)
    relu ? run(backward<16, true>) : run(backward<16, false>);
  else
    relu ? run(backward<8, true>) : run(backward<8, false>);
  return {dx, dw, db};
}

}  // namespace zenith::cpu
