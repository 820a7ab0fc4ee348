// float32 conv2d weight gradient of 3-wide, stride-1 convs on nChw8c (AVX2 hosts).
// oneDNN 2.6's AVX2 weight gradient runs well below its forward and data gradient on SeedCNN's
// second conv (64x32x15x15 -> 64, 3x3). Here the weight
// gradient is an outer product summed over output positions, register-blocked as a GEMM micro-
// kernel: per (4 output channels, 8 input channels, kernel row kh) twelve accumulators, one per
// output channel and kernel column, each a vector over the 8 input channels. At an output
// position the three input vectors under the kernel row (one new load, the window slides by one)
// meet 4 broadcast dy values: 12 FMAs for 5 loads. bench/conv_ops compares it with oneDNN's
// (docs/performance.md): faster up to 256 channels. At 512 oneDNN's op is a little faster per
// call (few output positions a row make the sliding window's start the larger share), but with
// it ResNet-18 CIFAR's step was no faster and graph mode's peak memory higher: kept here up to
// 512. Not measured beyond: oneDNN's there.
#include <immintrin.h>

#include <algorithm>

#include "backend/cpu/conv.h"
#include "backend/cpu/loops.h"
#include "backend/cpu/onednn.h"

namespace zenith::cpu {
namespace {

namespace dn = onednn;
using dnnl::memory;

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
}  // namespace

bool use_blocked_grad(const ConvGeometry& g) {
  return g.G == 1 && g.C % 8 == 0 && g.O % 8 == 0 && g.C <= 512 && g.O <= 512 && g.KW == 3 &&
         g.stride[0] == 1 && g.stride[1] == 1 && g.dilation[0] == 1 && g.dilation[1] == 1 &&
         use_avx2_fast_paths();
}
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

}  // namespace zenith::cpu
