// float32 conv2d weight gradient for few input channels (a network's first conv).
// With fewer input channels than a channel block, oneDNN's AVX2 weight-gradient kernel pads the
// channels to 8 and computes 8x the FLOPs (SeedCNN's first conv runs far slower than with
// AVX-512; forcing plain NCHW falls back to a slower gemm). This kernel reads
// dy in oneDNN's AVX2 format nChw8c and the plain input: per block of 8 output channels and up to
// 9 taps (c, kh, kw), one dy vector times a broadcast input value per tap and position.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "backend/cpu/conv.h"
#include "backend/cpu/loops.h"
#include "backend/cpu/onednn.h"

namespace zenith::cpu {
namespace {

namespace dn = onednn;
using dnnl::memory;

PaddedInput pad_input(const Tensor& x, const ConvGeometry& g) {
  return pad_planes(x.contiguous(), g, 1);
}

// One image's contribution to taps t0..t0+T-1 of output channels ob*8..ob*8+7: sums[t] (and
// sums[T], the bias, when kBias) += dy vector * input value over the output positions. dyn: the
// image's block ob of dy (nChw8c), xn: its padded input; off[t]: tap t0+t's offset from a
// window's top-left input element.
template <int T, bool kBias, size_t... I>
void few_channel_taps(const float* dyn, const float* xn, const int64_t* offsets,
                      const ConvGeometry& g, int64_t Wp, float* sums, std::index_sequence<I...>) {
  // Constant indices (the fold expressions) keep the accumulators in registers.
  __m256 acc[T] = {_mm256_loadu_ps(sums + 8 * I)...};
  __m256 accb = kBias ? _mm256_loadu_ps(sums + 8 * T) : _mm256_setzero_ps();
  const int64_t off[T] = {offsets[I]...};
  const int64_t OH = g.OH, OW = g.OW, sh = g.stride[0], sw = g.stride[1];
  for (int64_t oh = 0; oh < OH; ++oh) {
    const float* xw = xn + oh * sh * Wp;
    const float* dyp = dyn + oh * OW * 8;
    for (int64_t ow = 0; ow < OW; ++ow, xw += sw, dyp += 8) {
      const __m256 d = _mm256_loadu_ps(dyp);
      ((acc[I] = _mm256_fmadd_ps(d, _mm256_broadcast_ss(xw + off[I]), acc[I])), ...);
      if (kBias) accb = _mm256_add_ps(accb, d);
    }
  }
  (_mm256_storeu_ps(sums + 8 * I, acc[I]), ...);
  if (kBias) _mm256_storeu_ps(sums + 8 * T, accb);
}

template <int T>
void few_channel_chunk(const float* dyn, const float* xn, const int64_t* off, const ConvGeometry& g,
                       int64_t Wp, float* sums, bool bias) {
  if (bias)
    few_channel_taps<T, true>(dyn, xn, off, g, Wp, sums, std::make_index_sequence<T>());
  else
    few_channel_taps<T, false>(dyn, xn, off, g, Wp, sums, std::make_index_sequence<T>());
}
}  // namespace

bool use_few_channel_grad(const ConvGeometry& g) {
  return g.G == 1 && g.C < 8 && g.O % 8 == 0 && use_avx2_fast_paths();
}
PaddedInput pad_planes(const Tensor& x, const ConvGeometry& g, int64_t pixel) {
  PaddedInput p{x, g.H + g.pad_l[0] + g.pad_r[0], g.W + g.pad_l[1] + g.pad_r[1]};
  if (p.Hp == g.H && p.Wp == g.W) return p;
  const int64_t planes = g.N * g.C / pixel;
  Tensor padded = Tensor::zeros({planes, p.Hp, p.Wp, pixel}, DType::f32);
  const float* src = x.data<float>();
  float* dst = padded.data<float>();
  for (int64_t plane = 0; plane < planes; ++plane)
    for (int64_t h = 0; h < g.H; ++h)
      std::memcpy(dst + ((plane * p.Hp + h + g.pad_l[0]) * p.Wp + g.pad_l[1]) * pixel,
                  src + (plane * g.H + h) * g.W * pixel, size_t(g.W * pixel) * sizeof(float));
  p.t = padded;
  return p;
}
std::vector<Tensor> conv_backward_weights_few_channels(const Tensor& dy, const Tensor& x,
                                                       const ConvGeometry& g) {
  constexpr int64_t kChunk = 9;
  const memory::desc blocked8(dn::dims_of(g.y_shape()), memory::data_type::f32,
                              memory::format_tag::nChw8c);
  Tensor dy8 = dn::to_desc(dy, blocked8);
  if (dy8.has_layout()) dy8 = flat_physical(dy8);
  PaddedInput xp = pad_input(x, g);
  const int64_t taps = g.C * g.KH * g.KW;
  std::vector<int64_t> off(static_cast<size_t>(taps));
  for (int64_t c = 0; c < g.C; ++c)
    for (int64_t kh = 0; kh < g.KH; ++kh)
      for (int64_t kw = 0; kw < g.KW; ++kw)
        off[size_t((c * g.KH + kh) * g.KW + kw)] =
            (c * xp.Hp + kh * g.dilation[0]) * xp.Wp + kw * g.dilation[1];
  Tensor dw = Tensor::empty(g.w_shape(), DType::f32);
  Tensor db = g.bias ? Tensor::empty({g.O}, DType::f32) : Tensor();
  const float* pdy = dy8.data<float>();
  const float* px = xp.t.data<float>();
  float* pdw = dw.data<float>();
  float* pdb = g.bias ? db.data<float>() : nullptr;
  // One task per block of 8 output channels (each writes its own dw rows); per image, every
  // chunk of taps while the image's dy block is in cache.
  parallel_for(g.O / 8, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> sums(size_t(taps + 1) * 8);  // 8 lanes per tap, then the bias
    for (int64_t ob = begin; ob < end; ++ob) {
      std::fill(sums.begin(), sums.end(), 0.0f);
      for (int64_t n = 0; n < g.N; ++n) {
        const float* dyn = pdy + (n * g.O / 8 + ob) * g.OH * g.OW * 8;
        const float* xn = px + n * g.C * xp.Hp * xp.Wp;
        for (int64_t t0 = 0; t0 < taps; t0 += kChunk) {
          const int64_t count = std::min(kChunk, taps - t0);
          // The bias sum rides with the last chunk, in sums[taps].
          const bool bias = g.bias && t0 + count == taps;
          const int64_t* o = off.data() + t0;
          float* acc = sums.data() + t0 * 8;
          switch (count) {
#define ZENITH_FEW_CHANNEL_CASE(k)                         \
  case k:                                                  \
    few_channel_chunk<k>(dyn, xn, o, g, xp.Wp, acc, bias); \
    break;
            ZENITH_FEW_CHANNEL_CASE(1)
            ZENITH_FEW_CHANNEL_CASE(2)
            ZENITH_FEW_CHANNEL_CASE(3)
            ZENITH_FEW_CHANNEL_CASE(4)
            ZENITH_FEW_CHANNEL_CASE(5)
            ZENITH_FEW_CHANNEL_CASE(6)
            ZENITH_FEW_CHANNEL_CASE(7)
            ZENITH_FEW_CHANNEL_CASE(8)
            ZENITH_FEW_CHANNEL_CASE(9)
#undef ZENITH_FEW_CHANNEL_CASE
          }
        }
      }
      for (int64_t t = 0; t < taps; ++t)
        for (int64_t l = 0; l < 8; ++l) pdw[(ob * 8 + l) * taps + t] = sums[size_t(t * 8 + l)];
      if (g.bias) std::copy_n(sums.data() + taps * 8, 8, pdb + ob * 8);
    }
  });
  return {dw, db};
}

}  // namespace zenith::cpu
