// conv2d kernels: float32 through oneDNN convolution primitives (blocked layouts chosen by
// oneDNN, primitives cached per shape), float64 through im2col + dgemm as the reference. The
// two gradient kernels are the fast paths of the decompositions in src/ops/conv.cpp.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "backend/cpu/gemm.h"
#include "backend/cpu/loops.h"
#include "backend/cpu/onednn.h"
#include "core/dispatch.h"

namespace zenith::cpu {
namespace {

namespace dn = onednn;
using dnnl::memory;

struct ConvGeometry;
bool winograd_candidate(const ConvGeometry& g);

// N batch, C in channels, H, W; O out channels, G groups, KH x KW kernel, OH x OW output: the
// geometry ops::conv2d resolved (Conv2dAttrs), unpacked.
struct ConvGeometry {
  int64_t N, C, H, W, O, G, KH, KW, OH, OW;
  std::vector<int64_t> stride, pad_l, pad_r, dilation;  // dilation as in PyTorch (1 = none)
  bool bias;

  explicit ConvGeometry(const Conv2dAttrs& a)
      : N(a.input_shape[0]),
        C(a.input_shape[1]),
        H(a.input_shape[2]),
        W(a.input_shape[3]),
        O(a.weight_shape[0]),
        G(a.groups),
        KH(a.weight_shape[2]),
        KW(a.weight_shape[3]),
        OH(a.output_shape[2]),
        OW(a.output_shape[3]),
        stride(a.stride),
        pad_l(a.pad_begin),
        pad_r(a.pad_end),
        dilation(a.dilation),
        bias(a.bias) {}
  Shape x_shape() const { return {N, C, H, W}; }
  Shape w_shape() const { return {O, C / G, KH, KW}; }
  Shape y_shape() const { return {N, O, OH, OW}; }
  // oneDNN's weight dims: [G, O/G, C/G, KH, KW] when grouped.
  dn::Dims w_dims() const {
    if (G == 1) return {O, C, KH, KW};
    return {G, O / G, C / G, KH, KW};
  }
  dn::Dims dnnl_dilation() const { return {dilation[0] - 1, dilation[1] - 1}; }
  dn::Key key(const char* op) const {
    dn::Key k(op);
    k.add(x_shape()).add(w_shape()).add(stride).add(pad_l).add(pad_r).add(dilation).add(G).add(
        int64_t(bias));
    k.add(int64_t(winograd_candidate(*this))).add(int64_t(conv_algorithm() == "winograd"));
    return k;
  }
};

// ---- float32: oneDNN

memory::desc any_desc(const dn::Dims& dims) {
  return memory::desc(dims, memory::data_type::f32, memory::format_tag::any);
}

// Winograd F(4x4, 3x3) is used for 3x3, stride-1, undilated, ungrouped convs with 64..256 input
// and output channels at a batch of 8 or more ("auto"); "winograd" forces it where oneDNN supports
// the shape, "direct" never uses it. Measured on 2 EPYC cores, batch 32: 1.1-1.8x faster on
// ResNet's 64..256-channel convs, slower for 512-channel and small ones. The choice is a fixed
// rule, not a timing, so a run (and a resumed run) is reproducible. Its rounding (~1e-6 relative
// per conv) is amplified by batch norm over tiny batches, hence the batch bound.
bool winograd_candidate(const ConvGeometry& g) {
  const std::string& algo = conv_algorithm();
  if (algo == "direct") return false;
  bool shape_ok = g.G == 1 && g.KH == 3 && g.KW == 3 && g.stride[0] == 1 && g.stride[1] == 1 &&
                  g.dilation[0] == 1 && g.dilation[1] == 1;
  if (algo == "winograd") return shape_ok;
  return shape_ok && g.N >= 8 && g.C >= 64 && g.C <= 256 && g.O >= 64 && g.O <= 256;
}

// One conv direction for one shape: Winograd where the rule above picks it and oneDNN has an
// implementation, else direct.
template <typename PD, typename P>
struct ConvPrimitive {
  PD pd;
  dn::Primitive prim;

  // make(algorithm) -> PD; throws dnnl::error when oneDNN has no implementation.
  template <typename Make>
  ConvPrimitive(const ConvGeometry& g, Make&& make) {
    bool made = false;
    if (winograd_candidate(g)) {
      try {
        pd = make(dnnl::algorithm::convolution_winograd);
        made = true;
      } catch (const dnnl::error&) {
        // unsupported (e.g. channels not a multiple of 16): direct
      }
    }
    if (!made) pd = make(dnnl::algorithm::convolution_direct);
    prim = dn::Primitive(P(pd));
  }
};

using ConvFwd = ConvPrimitive<dnnl::convolution_forward::primitive_desc, dnnl::convolution_forward>;
using ConvBwdData =
    ConvPrimitive<dnnl::convolution_backward_data::primitive_desc, dnnl::convolution_backward_data>;
using ConvBwdWeights = ConvPrimitive<dnnl::convolution_backward_weights::primitive_desc,
                                     dnnl::convolution_backward_weights>;

memory::desc bias_desc(const ConvGeometry& g) {
  return g.bias ? memory::desc({g.O}, memory::data_type::f32, memory::format_tag::a)
                : memory::desc();
}

// relu: a ReLU post-op on the output (conv2d_relu, graph mode's Conv+ReLU fusion).
dnnl::convolution_forward::primitive_desc fwd_pd(const ConvGeometry& g, dnnl::algorithm alg,
                                                 bool relu = false) {
  dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_training, alg,
                                    any_desc(dn::dims_of(g.x_shape())), any_desc(g.w_dims()),
                                    bias_desc(g), any_desc(dn::dims_of(g.y_shape())), g.stride,
                                    g.dnnl_dilation(), g.pad_l, g.pad_r);
  dnnl::primitive_attr attr;
  if (relu) {
    dnnl::post_ops post;
    post.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    attr.set_post_ops(post);
  }
  return dnnl::convolution_forward::primitive_desc(d, attr, dn::engine());
}

std::shared_ptr<ConvFwd> conv_fwd(const ConvGeometry& g, bool relu) {
  return dn::cached<ConvFwd>(g.key(relu ? "conv_relu_fwd" : "conv_fwd").str(), [&] {
    return std::make_shared<ConvFwd>(g, [&](dnnl::algorithm alg) { return fwd_pd(g, alg, relu); });
  });
}

// A contiguous weight [O, C/G, KH, KW] in oneDNN's (possibly grouped) plain descriptor.
memory::desc plain_weight_desc(const ConvGeometry& g) {
  return memory::desc(g.w_dims(), memory::data_type::f32,
                      g.G == 1 ? memory::format_tag::oihw : memory::format_tag::goihw);
}

// The weight reordered to `want` (a copy only when the formats differ).
Tensor weight_in(const Tensor& w, const ConvGeometry& g, const memory::desc& want) {
  Tensor wc = w.contiguous();
  memory::desc have = plain_weight_desc(g);
  if (have == want) return wc;
  Tensor out = dn::empty_in(wc.shape(), DType::f32, want);
  dn::reorder(wc, have, out, want);
  return out;
}

Tensor conv_forward_f32(const Tensor& x, const Tensor& w, const Tensor& bias, const ConvGeometry& g,
                        bool relu) {
  auto e = conv_fwd(g, relu);
  const auto& pd = e->pd;
  Tensor src = dn::to_desc(x, pd.src_desc());
  Tensor wt = weight_in(w, g, pd.weights_desc());
  Tensor dst = dn::empty_in(g.y_shape(), DType::f32, pd.dst_desc());
  std::vector<dn::Arg> args = {dn::arg(DNNL_ARG_SRC, src),
                               dn::arg(DNNL_ARG_WEIGHTS, wt, pd.weights_desc()),
                               dn::arg(DNNL_ARG_DST, dst)};
  Tensor b;
  if (g.bias) {
    b = bias.contiguous();
    args.push_back(dn::arg(DNNL_ARG_BIAS, b));
  }
  e->prim.run(args);
  return dn::finish_output(dst);
}

Tensor conv_backward_data_f32(const Tensor& dy, const Tensor& w, const ConvGeometry& g) {
  auto e = dn::cached<ConvBwdData>(g.key("conv_bwd_data").str(), [&] {
    auto hint = fwd_pd(g, dnnl::algorithm::convolution_direct);
    return std::make_shared<ConvBwdData>(g, [&](dnnl::algorithm alg) {
      dnnl::convolution_backward_data::desc d(
          alg, any_desc(dn::dims_of(g.x_shape())), any_desc(g.w_dims()),
          any_desc(dn::dims_of(g.y_shape())), g.stride, g.dnnl_dilation(), g.pad_l, g.pad_r);
      return dnnl::convolution_backward_data::primitive_desc(d, dn::engine(), hint);
    });
  });
  const auto& pd = e->pd;
  Tensor ddst = dn::to_desc(dy, pd.diff_dst_desc());
  Tensor wt = weight_in(w, g, pd.weights_desc());
  Tensor dsrc = dn::empty_in(g.x_shape(), DType::f32, pd.diff_src_desc());
  e->prim.run({dn::arg(DNNL_ARG_DIFF_DST, ddst), dn::arg(DNNL_ARG_WEIGHTS, wt, pd.weights_desc()),
               dn::arg(DNNL_ARG_DIFF_SRC, dsrc)});
  return dn::finish_output(dsrc);
}

// ---- float32 weight gradient for few input channels (a network's first conv)
//
// With fewer input channels than a channel block, oneDNN's AVX2 weight-gradient kernel pads the
// channels to 8 and computes 8x the FLOPs (SeedCNN fmnist's 64x1x28x28 -> 32 conv: 2.1 ms against
// 0.19 ms with AVX-512; forcing plain NCHW falls back to gemm:jit at 0.96 ms). This kernel reads
// dy in oneDNN's AVX2 format nChw8c and the plain input: per block of 8 output channels and up to
// 9 taps (c, kh, kw), one dy vector times a broadcast input value per tap and position.

bool use_few_channel_grad(const ConvGeometry& g) {
  return g.G == 1 && g.C < 8 && g.O % 8 == 0 && use_avx2_fast_paths();
}

// An input zero-padded to Hp x Wp per plane, so a kernel reads every tap of every output position
// without bounds checks: t is x itself (contiguous) where there is no padding. `pixel` floats
// make a pixel: 1 for plain NCHW ([N, C, Hp, Wp]), 8 for nChw8c ([N, C / 8, Hp, Wp, 8]).
struct PaddedInput {
  Tensor t;
  int64_t Hp, Wp;
};
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

// -> {dw [O, C, KH, KW], db [O] (undefined without a bias)}
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

// ---- float32 weight gradient of 3-wide, stride-1 convs on nChw8c (AVX2 hosts)
//
// oneDNN 2.6's AVX2 weight gradient ran SeedCNN's second conv (64x32x15x15 -> 64, 3x3) at
// ~106 GFLOP/s on 2 EPYC cores against ~150 for its forward and data gradient. Here the weight
// gradient is an outer product summed over output positions, register-blocked as a GEMM micro-
// kernel: per (4 output channels, 8 input channels, kernel row kh) twelve accumulators, one per
// output channel and kernel column, each a vector over the 8 input channels. At an output
// position the three input vectors under the kernel row (one new load, the window slides by one)
// meet 4 broadcast dy values: 12 FMAs for 5 loads. bench/conv_ops, 2 AVX2 EPYC cores, min of
// 20 calls: SeedCNN's 190 GFLOP/s against oneDNN's 130; batch 8, padding 1: 64ch 32x32 179 / 138,
// 256ch 8x8 158 / 139 (146 / 143 in a later run), 64ch 56x56 171 / 134, 128ch 16x16 127-151 /
// 106-119. At 512 channels oneDNN's op is the faster, measured back to back in 6 runs (ResNet-18
// CIFAR's 4x4: 6.6-9.0 ms against 6.1-8.2; 7x7: 17.1-25.2 against 13.8-18.3: few output
// positions a row make the sliding window's start and the loop the larger share), but with it
// for 512 channels ResNet-18 CIFAR b8's step differed by no more than the host's noise (graph
// 197.3 and 183.0 ms against 246.9 and 184.0 in alternating runs, the far-off one a slow phase
// that slowed eager alike: 257.1 against 205.2) and graph mode's peak was 6.1 MB higher (56.8
// against 50.7 MB): kept here up to 512. Not measured beyond: oneDNN's there.
bool use_blocked_grad(const ConvGeometry& g) {
  return g.G == 1 && g.C % 8 == 0 && g.O % 8 == 0 && g.C <= 512 && g.O <= 512 && g.KW == 3 &&
         g.stride[0] == 1 && g.stride[1] == 1 && g.dilation[0] == 1 && g.dilation[1] == 1 &&
         use_avx2_fast_paths();
}

// The input in nChw8c, zero-padded.
PaddedInput pad_blocked(const Tensor& x, const ConvGeometry& g) {
  const memory::desc blocked8(dn::dims_of(g.x_shape()), memory::data_type::f32,
                              memory::format_tag::nChw8c);
  Tensor x8 = dn::to_desc(x, blocked8);
  if (x8.has_layout()) x8 = flat_physical(x8);
  return pad_planes(x8, g, 8);
}

// sums[j][kw] += dy[o_j] * x[kw], FMA by FMA, over `rows` output rows of `images` images:
// every weight's terms in one chain in the order (image, row, column) however the batch is cut
// into pieces. (Summing each piece from zero and adding the pieces rounds less, 5e-5 against
// 5e-4 absolute at SeedCNN's shape, but in TrainNproc.RanksMatchOneProcessWithTheCombinedBatch 4
// ranks then ended 2.3e-5 from one process, the same figure for several piece sizes: a discrete
// event such as a ReLU or a pooling window flipping, against 2.4e-7 with this order and with
// oneDNN's.) dyb points at the first image's dy
// block (nChw8c) at the first row, offset to the task's first of 4 output channels, xb at its
// input block (padded nChw8c) at the first row plus kernel row kh; dy_image / x_image: one
// image's stride in floats.
void blocked_grad_rows(const float* dyb, const float* xb, int64_t images, int64_t rows,
                       int64_t dy_image, int64_t x_image, int64_t OW, int64_t Wp, float* sums) {
  __m256 a00 = _mm256_loadu_ps(sums + 0), a01 = _mm256_loadu_ps(sums + 8),
         a02 = _mm256_loadu_ps(sums + 16), a10 = _mm256_loadu_ps(sums + 24),
         a11 = _mm256_loadu_ps(sums + 32), a12 = _mm256_loadu_ps(sums + 40),
         a20 = _mm256_loadu_ps(sums + 48), a21 = _mm256_loadu_ps(sums + 56),
         a22 = _mm256_loadu_ps(sums + 64), a30 = _mm256_loadu_ps(sums + 72),
         a31 = _mm256_loadu_ps(sums + 80), a32 = _mm256_loadu_ps(sums + 88);
  for (int64_t n = 0; n < images; ++n)
    for (int64_t oh = 0; oh < rows; ++oh) {
      const float* xr = xb + n * x_image + oh * Wp * 8;
      const float* dr = dyb + n * dy_image + oh * OW * 8;
      __m256 x0 = _mm256_loadu_ps(xr), x1 = _mm256_loadu_ps(xr + 8);
      for (int64_t ow = 0; ow < OW; ++ow) {
        const __m256 x2 = _mm256_loadu_ps(xr + (ow + 2) * 8);
        const float* d = dr + ow * 8;
        __m256 b = _mm256_broadcast_ss(d + 0);
        a00 = _mm256_fmadd_ps(b, x0, a00);
        a01 = _mm256_fmadd_ps(b, x1, a01);
        a02 = _mm256_fmadd_ps(b, x2, a02);
        b = _mm256_broadcast_ss(d + 1);
        a10 = _mm256_fmadd_ps(b, x0, a10);
        a11 = _mm256_fmadd_ps(b, x1, a11);
        a12 = _mm256_fmadd_ps(b, x2, a12);
        b = _mm256_broadcast_ss(d + 2);
        a20 = _mm256_fmadd_ps(b, x0, a20);
        a21 = _mm256_fmadd_ps(b, x1, a21);
        a22 = _mm256_fmadd_ps(b, x2, a22);
        b = _mm256_broadcast_ss(d + 3);
        a30 = _mm256_fmadd_ps(b, x0, a30);
        a31 = _mm256_fmadd_ps(b, x1, a31);
        a32 = _mm256_fmadd_ps(b, x2, a32);
        x0 = x1;
        x1 = x2;
      }
    }
  const __m256 acc[12] = {a00, a01, a02, a10, a11, a12, a20, a21, a22, a30, a31, a32};
  for (int k = 0; k < 12; ++k) _mm256_storeu_ps(sums + 8 * k, acc[k]);
}

// -> {dw [O, C, KH, 3], db [O] (undefined without a bias)}
std::vector<Tensor> conv_backward_weights_blocked(const Tensor& dy, const Tensor& x,
                                                  const ConvGeometry& g) {
  const memory::desc blocked8(dn::dims_of(g.y_shape()), memory::data_type::f32,
                              memory::format_tag::nChw8c);
  Tensor dy8 = dn::to_desc(dy, blocked8);
  if (dy8.has_layout()) dy8 = flat_physical(dy8);
  PaddedInput xp = pad_blocked(x, g);
  const int64_t OB = g.O / 8, CB = g.C / 8, KH = g.KH;
  // A task: 4 output channels (half a block), a block of 8 input channels, a kernel row.
  const int64_t tasks = OB * 2 * CB * KH;
  std::vector<float> sums(size_t(tasks) * 96, 0.0f);
  const float* pdy = dy8.data<float>();
  const float* px = xp.t.data<float>();
  const int64_t dy_image = g.O * g.OH * g.OW, x_image = g.C * xp.Hp * xp.Wp;
  // Each thread sweeps its tasks over a piece of the batch at a time, small enough that the
  // piece's input and dy (every channel) stay in L2 across the sweep: whole images where one
  // fits (SeedCNN: 2 of 68 KB), else a band of rows of one image (large images). Every task
  // still sums its terms in the order (image, row, column).
  constexpr int64_t kPieceBytes = 192 << 10;
  const int64_t row_bytes = (g.C * xp.Wp + g.O * g.OW) * int64_t(sizeof(float));
  int64_t images = 1, rows = g.OH;
  if (row_bytes * g.OH <= kPieceBytes)
    images = std::clamp<int64_t>(kPieceBytes / (row_bytes * g.OH), 1, g.N);
  else
    rows = std::max<int64_t>(1, kPieceBytes / row_bytes);
  parallel_for(tasks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t n0 = 0; n0 < g.N; n0 += images)
      for (int64_t oh0 = 0; oh0 < g.OH; oh0 += rows) {
        const int64_t ni = std::min(images, g.N - n0), nr = std::min(rows, g.OH - oh0);
        for (int64_t t = begin; t < end; ++t) {
          const int64_t kh = t % KH, cb = (t / KH) % CB, half = (t / (KH * CB)) % 2,
                        ob = t / (KH * CB * 2);
          const float* dyb = pdy + n0 * dy_image + (ob * g.OH + oh0) * g.OW * 8 + half * 4;
          const float* xb = px + n0 * x_image + (cb * xp.Hp + kh + oh0) * xp.Wp * 8;
          blocked_grad_rows(dyb, xb, ni, nr, dy_image, x_image, g.OW, xp.Wp, sums.data() + t * 96);
        }
      }
  });
  Tensor dw = Tensor::empty(g.w_shape(), DType::f32);
  float* pdw = dw.data<float>();
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t kh = t % KH, cb = (t / KH) % CB, half = (t / (KH * CB)) % 2,
                  ob = t / (KH * CB * 2);
    const float* s = sums.data() + t * 96;
    for (int64_t j = 0; j < 4; ++j)
      for (int64_t kw = 0; kw < 3; ++kw)
        for (int64_t l = 0; l < 8; ++l) {
          const int64_t o = ob * 8 + half * 4 + j, c = cb * 8 + l;
          pdw[((o * g.C + c) * KH + kh) * 3 + kw] = s[(j * 3 + kw) * 8 + l];
        }
  }
  Tensor db;
  if (g.bias) {
    db = Tensor::empty({g.O}, DType::f32);
    float* pdb = db.data<float>();
    for (int64_t ob = 0; ob < OB; ++ob) {
      __m256 acc = _mm256_setzero_ps();
      for (int64_t n = 0; n < g.N; ++n) {
        const float* d = pdy + n * dy_image + ob * g.OH * g.OW * 8;
        for (int64_t p = 0; p < g.OH * g.OW; ++p)
          acc = _mm256_add_ps(acc, _mm256_loadu_ps(d + p * 8));
      }
      _mm256_storeu_ps(pdb + ob * 8, acc);
    }
  }
  return {dw, db};
}

std::vector<Tensor> conv_backward_weights_f32(const Tensor& dy, const Tensor& x,
                                              const ConvGeometry& g) {
  if (use_few_channel_grad(g)) return conv_backward_weights_few_channels(dy, x, g);
  if (use_blocked_grad(g)) return conv_backward_weights_blocked(dy, x, g);
  auto e = dn::cached<ConvBwdWeights>(g.key("conv_bwd_weights").str(), [&] {
    auto hint = fwd_pd(g, dnnl::algorithm::convolution_direct);
    return std::make_shared<ConvBwdWeights>(g, [&](dnnl::algorithm alg) {
      dnnl::convolution_backward_weights::desc d(
          alg, any_desc(dn::dims_of(g.x_shape())), any_desc(g.w_dims()), bias_desc(g),
          any_desc(dn::dims_of(g.y_shape())), g.stride, g.dnnl_dilation(), g.pad_l, g.pad_r);
      return dnnl::convolution_backward_weights::primitive_desc(d, dn::engine(), hint);
    });
  });
  const auto& pd = e->pd;
  Tensor src = dn::to_desc(x, pd.src_desc());
  Tensor ddst = dn::to_desc(dy, pd.diff_dst_desc());
  memory::desc dw_desc = pd.diff_weights_desc();
  memory::desc plain_w = plain_weight_desc(g);
  // Write straight into the plain gradient when oneDNN chose the plain format.
  Tensor dw = Tensor::empty(g.w_shape(), DType::f32);
  Tensor dw_blocked = dw_desc == plain_w ? dw : dn::empty_in(g.w_shape(), DType::f32, dw_desc);
  std::vector<dn::Arg> args = {dn::arg(DNNL_ARG_SRC, src), dn::arg(DNNL_ARG_DIFF_DST, ddst),
                               dn::arg(DNNL_ARG_DIFF_WEIGHTS, dw_blocked, dw_desc)};
  Tensor db;
  if (g.bias) {
    db = Tensor::empty({g.O}, DType::f32);
    args.push_back(dn::arg(DNNL_ARG_DIFF_BIAS, db));
  }
  e->prim.run(args);
  if (!dw_blocked.is_same(dw)) dn::reorder(dw_blocked, dw_desc, dw, plain_w);
  return {dw, db};
}

// ---- float64: im2col + gemm (the reference the float32 kernels are tested against)

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

// ---- kernels

// conv2d(x, weight, bias?) -> y
std::vector<Tensor> conv2d_kernel(const std::vector<Tensor>& in, const Conv2dAttrs& attrs) {
  ConvGeometry g(attrs);
  if (in[0].dtype() == DType::f32) return {conv_forward_f32(in[0], in[1], in[2], g, false)};
  return visit_float(in[0].dtype(), "conv2d", [&](auto tag) {
    return std::vector<Tensor>{conv_forward_ref<decltype(tag)>(in[0], in[1], in[2], g)};
  });
}

// conv2d_relu(x, weight, bias?) -> relu(conv2d): float32 through oneDNN's ReLU post-op; the
// float64 reference applies relu to the reference convolution in place.
std::vector<Tensor> conv2d_relu_kernel(const std::vector<Tensor>& in, const Conv2dAttrs& attrs) {
  ConvGeometry g(attrs);
  if (in[0].dtype() == DType::f32) return {conv_forward_f32(in[0], in[1], in[2], g, true)};
  return visit_float(in[0].dtype(), "conv2d_relu", [&](auto tag) {
    using T = decltype(tag);
    Tensor y = conv_forward_ref<T>(in[0], in[1], in[2], g);
    T* p = y.data<T>();
    for (int64_t i = 0; i < y.numel(); ++i) p[i] = p[i] < T(0) ? T(0) : p[i];
    return std::vector<Tensor>{y};
  });
}

// conv2d_backward_data(dy, weight) -> dx
std::vector<Tensor> conv2d_backward_data_kernel(const std::vector<Tensor>& in,
                                                const Conv2dAttrs& attrs) {
  ConvGeometry g(attrs);
  if (in[0].dtype() == DType::f32) return {conv_backward_data_f32(in[0], in[1], g)};
  return visit_float(in[0].dtype(), "conv2d_backward_data", [&](auto tag) {
    return std::vector<Tensor>{conv_backward_data_ref<decltype(tag)>(in[0], in[1], g)};
  });
}

// conv2d_backward_weights(dy, x) -> dweight, dbias (undefined without a bias)
std::vector<Tensor> conv2d_backward_weights_kernel(const std::vector<Tensor>& in,
                                                   const Conv2dAttrs& attrs) {
  ConvGeometry g(attrs);
  if (in[0].dtype() == DType::f32) return conv_backward_weights_f32(in[0], in[1], g);
  return visit_float(in[0].dtype(), "conv2d_backward_weights", [&](auto tag) {
    return conv_backward_weights_ref<decltype(tag)>(in[0], in[1], g);
  });
}

ZENITH_REGISTER_KERNEL(conv2d, CPU, conv2d_kernel);
ZENITH_REGISTER_KERNEL(conv2d_backward_data, CPU, conv2d_backward_data_kernel);
ZENITH_REGISTER_KERNEL(conv2d_backward_weights, CPU, conv2d_backward_weights_kernel);
ZENITH_REGISTER_KERNEL(conv2d_relu, CPU, conv2d_relu_kernel);
ZENITH_LAYOUT_AWARE(conv2d);
ZENITH_LAYOUT_AWARE(conv2d_relu);
ZENITH_LAYOUT_AWARE(conv2d_backward_data);
ZENITH_LAYOUT_AWARE(conv2d_backward_weights);

}  // namespace

}  // namespace zenith::cpu
