// conv2d's reference kernels: im2col + gemm (float64, the reference the float32 kernels are
// tested against).
#include <algorithm>
#include <cstring>

#include "backend/cpu/conv.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/loops.h"

namespace zenith::cpu {
namespace {

// col [C/G * KH * KW, OH * OW] from one image's group of channels xg [C/G, H, W].
template <typename T>
void im2col(const T* xg, T* col, const ConvGeometry& g) {
  const int64_t cg = g.C / g.G;
  for (int64_t c = 0; c < cg; ++c)
    for (int64_t kh = 0; kh < g.KH; ++kh)
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        T* row = col + ((c * g.KH + kh) * g.KW + kw) * g.OH * g.OW;
        for (int64_t oh = 0; oh < g.OH; ++oh) {
          int64_t ih = oh * g.stride[0] - g.pad_l[0] + kh * g.dilation[0];
          for (int64_t ow = 0; ow < g.OW; ++ow) {
            int64_t iw = ow * g.stride[1] - g.pad_l[1] + kw * g.dilation[1];
            bool inside = ih >= 0 && ih < g.H && iw >= 0 && iw < g.W;
            row[oh * g.OW + ow] = inside ? xg[(c * g.H + ih) * g.W + iw] : T(0);
          }
        }
      }
}

// The adjoint of im2col: accumulates col back into dxg [C/G, H, W].
template <typename T>
void col2im(const T* col, T* dxg, const ConvGeometry& g) {
  const int64_t cg = g.C / g.G;
  for (int64_t c = 0; c < cg; ++c)
    for (int64_t kh = 0; kh < g.KH; ++kh)
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        const T* row = col + ((c * g.KH + kh) * g.KW + kw) * g.OH * g.OW;
        for (int64_t oh = 0; oh < g.OH; ++oh) {
          int64_t ih = oh * g.stride[0] - g.pad_l[0] + kh * g.dilation[0];
          if (ih < 0 || ih >= g.H) continue;
          for (int64_t ow = 0; ow < g.OW; ++ow) {
            int64_t iw = ow * g.stride[1] - g.pad_l[1] + kw * g.dilation[1];
            if (iw >= 0 && iw < g.W) dxg[(c * g.H + ih) * g.W + iw] += row[oh * g.OW + ow];
          }
        }
      }
}
}  // namespace

template <typename T>
Tensor conv_forward_ref(const Tensor& xin, const Tensor& win, const Tensor& bias,
                        const ConvGeometry& g) {
  Tensor x = xin.contiguous(), w = win.contiguous();
  Tensor y = Tensor::empty(g.y_shape(), x.dtype());
  const int64_t cg = g.C / g.G, og = g.O / g.G, kk = cg * g.KH * g.KW, spatial = g.OH * g.OW;
  std::vector<T> col(size_t(kk * spatial));
  const T* px = x.data<T>();
  const T* pw = w.data<T>();
  T* py = y.data<T>();
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t gi = 0; gi < g.G; ++gi) {
      im2col(px + (n * g.C + gi * cg) * g.H * g.W, col.data(), g);
      gemm(false, false, og, spatial, kk, T(1), pw + gi * og * kk, kk, col.data(), spatial, T(0),
           py + (n * g.O + gi * og) * spatial, spatial);
    }
  if (g.bias) {
    Tensor b = bias.contiguous();
    const T* pb = b.data<T>();
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t o = 0; o < g.O; ++o)
        for (int64_t i = 0; i < spatial; ++i) py[(n * g.O + o) * spatial + i] += pb[o];
  }
  return y;
}

template <typename T>
Tensor conv_backward_data_ref(const Tensor& dyin, const Tensor& win, const ConvGeometry& g) {
  Tensor dy = dyin.contiguous(), w = win.contiguous();
  Tensor dx = Tensor::zeros(g.x_shape(), dy.dtype());
  const int64_t cg = g.C / g.G, og = g.O / g.G, kk = cg * g.KH * g.KW, spatial = g.OH * g.OW;
  std::vector<T> col(size_t(kk * spatial));
  const T* pdy = dy.data<T>();
  const T* pw = w.data<T>();
  T* pdx = dx.data<T>();
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t gi = 0; gi < g.G; ++gi) {
      // dcol [kk, spatial] = W_g^T [kk, og] dy [og, spatial]
      gemm(true, false, kk, spatial, og, T(1), pw + gi * og * kk, kk,
           pdy + (n * g.O + gi * og) * spatial, spatial, T(0), col.data(), spatial);
      col2im(col.data(), pdx + (n * g.C + gi * cg) * g.H * g.W, g);
    }
  return dx;
}

template <typename T>
std::vector<Tensor> conv_backward_weights_ref(const Tensor& dyin, const Tensor& xin,
                                              const ConvGeometry& g) {
  Tensor dy = dyin.contiguous(), x = xin.contiguous();
  Tensor dw = Tensor::zeros(g.w_shape(), dy.dtype());
  const int64_t cg = g.C / g.G, og = g.O / g.G, kk = cg * g.KH * g.KW, spatial = g.OH * g.OW;
  std::vector<T> col(size_t(kk * spatial));
  const T* pdy = dy.data<T>();
  const T* px = x.data<T>();
  T* pdw = dw.data<T>();
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t gi = 0; gi < g.G; ++gi) {
      im2col(px + (n * g.C + gi * cg) * g.H * g.W, col.data(), g);
      // dW_g [og, kk] += dy [og, spatial] col^T [spatial, kk]
      gemm(false, true, og, kk, spatial, T(1), pdy + (n * g.O + gi * og) * spatial, spatial,
           col.data(), spatial, T(1), pdw + gi * og * kk, kk);
    }
  Tensor db;
  if (g.bias) {
    db = Tensor::zeros({g.O}, dy.dtype());
    T* pdb = db.data<T>();
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t o = 0; o < g.O; ++o)
        for (int64_t i = 0; i < spatial; ++i) pdb[o] += pdy[(n * g.O + o) * spatial + i];
  }
  return {dw, db};
}

template Tensor conv_forward_ref<float>(const Tensor&, const Tensor&, const Tensor&,
                                        const ConvGeometry&);
template Tensor conv_forward_ref<double>(const Tensor&, const Tensor&, const Tensor&,
                                         const ConvGeometry&);
template Tensor conv_backward_data_ref<float>(const Tensor&, const Tensor&, const ConvGeometry&);
template Tensor conv_backward_data_ref<double>(const Tensor&, const Tensor&, const ConvGeometry&);
template std::vector<Tensor> conv_backward_weights_ref<float>(const Tensor&, const Tensor&,
                                                              const ConvGeometry&);
template std::vector<Tensor> conv_backward_weights_ref<double>(const Tensor&, const Tensor&,
                                                               const ConvGeometry&);

}  // namespace zenith::cpu
