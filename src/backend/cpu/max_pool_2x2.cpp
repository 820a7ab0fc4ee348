// zenith's own 2x2 stride-2 max pooling on nChw8c / nChw16c (max_pool_2x2.h), and the CPU
// kernels of graph mode's max_pool2d_relu and max_pool2d_relu_backward.
//
// oneDNN's AVX2 max pooling with its workspace is much slower than its AVX-512 one on SeedCNN's
// 64x32x26x26. Here a window is four vectors of 8 channels (two such
// halves per 16-channel block); the ReLU after the pooling is one more blend on the output, and
// its backward one more mask on dy, so graph mode's fused ops read and write each tensor once.
#include "backend/cpu/max_pool_2x2.h"

#include <immintrin.h>

#include <algorithm>

#include "backend/cpu/conv_pool.h"
#include "backend/cpu/loops.h"
#include "backend/cpu/onednn.h"
#include "core/dispatch.h"

namespace zenith::cpu {
namespace {

namespace dn = onednn;
using dnnl::memory;

// N batch, C channels, H x W input, OH x OW output, B channels per block.
struct Geometry {
  int64_t N, C, H, W, OH, OW, B;
  int64_t blocks() const { return N * C / B; }
  Shape x_shape() const { return {N, C, H, W}; }
  Shape y_shape() const { return {N, C, OH, OW}; }
};

Geometry geometry(const Shape& x, const Pool2dAttrs& a, int64_t block) {
  return {x[0], x[1], x[2], x[3], a.output_size[0], a.output_size[1], block};
}

memory::desc blocked(const Shape& s, int64_t block) {
  return memory::desc(dn::dims_of(s), memory::data_type::f32,
                      block == 16 ? memory::format_tag::nChw16c : memory::format_tag::nChw8c);
}

// A blocked tensor as a flat float buffer over its storage.
float* blocked_data(const Tensor& t) {
  Tensor flat = t.has_layout() ? flat_physical(t) : t;
  return flat.data<float>();
}

template <int B>
void pool_forward(const float* px, float* py, uint8_t* pws, const Geometry& g, bool relu) {
  constexpr int halves = B / 8;
  const int64_t masks = relu ? 3 : 2;
  const int64_t H = g.H, W = g.W, OH = g.OH, OW = g.OW;
  parallel_for(g.blocks(), 1, [&](int64_t begin, int64_t end) {
    const __m256 all = _mm256_castsi256_ps(_mm256_set1_epi32(-1)), none = _mm256_setzero_ps();
    for (int64_t p = begin; p < end; ++p)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow)
          for (int h = 0; h < halves; ++h) {
            const float* w0 = px + ((p * H + 2 * oh) * W + 2 * ow) * B + h * 8;
            const float* cell[4] = {w0, w0 + B, w0 + W * B, w0 + W * B + B};
            __m256 best = _mm256_loadu_ps(cell[0]), bit0 = none, bit1 = none;
            for (int k = 1; k < 4; ++k) {
              const __m256 v = _mm256_loadu_ps(cell[k]);
              const __m256 take = _mm256_or_ps(_mm256_cmp_ps(v, best, _CMP_GT_OQ),
                                               _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
              best = _mm256_blendv_ps(best, v, take);
              bit0 = _mm256_blendv_ps(bit0, (k & 1) ? all : none, take);
              bit1 = _mm256_blendv_ps(bit1, (k & 2) ? all : none, take);
            }
            const int64_t o = ((p * OH + oh) * OW + ow) * halves + h;
            pws[o * masks] = uint8_t(_mm256_movemask_ps(bit0));
            pws[o * masks + 1] = uint8_t(_mm256_movemask_ps(bit1));
            if (relu) {
              // relu as its kernel has it: x < 0 ? 0 : x (NaN and -0 kept); its backward's mask
              // y > 0 kept in the workspace.
              best = _mm256_blendv_ps(best, none, _mm256_cmp_ps(best, none, _CMP_LT_OQ));
              pws[o * masks + 2] =
                  uint8_t(_mm256_movemask_ps(_mm256_cmp_ps(best, none, _CMP_GT_OQ)));
            }
            _mm256_storeu_ps(py + o * 8, best);
          }
  });
}

// relu: the workspace's third mask says where relu's output was > 0 (dy is masked there, as
// relu_backward does).
template <int B>
void pool_backward(const float* pdy, const uint8_t* pws, float* pdx, const Geometry& g, bool relu) {
  constexpr int halves = B / 8;
  const int64_t masks = relu ? 3 : 2;
  const int64_t H = g.H, W = g.W, OH = g.OH, OW = g.OW;
  parallel_for(g.blocks(), 1, [&](int64_t begin, int64_t end) {
    const __m256i lane_bits = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    auto lanes = [&](uint8_t bits) {
      return _mm256_castsi256_ps(
          _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(bits), lane_bits), lane_bits));
    };
    for (int64_t p = begin; p < end; ++p)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow)
          for (int h = 0; h < halves; ++h) {
            const int64_t o = ((p * OH + oh) * OW + ow) * halves + h;
            __m256 d = _mm256_loadu_ps(pdy + o * 8);
            if (relu) d = _mm256_and_ps(lanes(pws[o * masks + 2]), d);
            const __m256 b0 = lanes(pws[o * masks]), b1 = lanes(pws[o * masks + 1]);
            float* w0 = pdx + ((p * H + 2 * oh) * W + 2 * ow) * B + h * 8;
            _mm256_storeu_ps(w0, _mm256_andnot_ps(_mm256_or_ps(b0, b1), d));            // k = 0
            _mm256_storeu_ps(w0 + B, _mm256_and_ps(_mm256_andnot_ps(b1, b0), d));       // k = 1
            _mm256_storeu_ps(w0 + W * B, _mm256_and_ps(_mm256_andnot_ps(b0, b1), d));   // 2
            _mm256_storeu_ps(w0 + W * B + B, _mm256_and_ps(_mm256_and_ps(b0, b1), d));  // 3
          }
    // Rows and columns in no window (an odd H or W: the last): their gradient is 0.
    for (int64_t p = begin; p < end; ++p) {
      float* plane = pdx + p * H * W * B;
      if (W > 2 * OW)
        for (int64_t h = 0; h < 2 * OH; ++h)
          std::fill_n(plane + (h * W + 2 * OW) * B, (W - 2 * OW) * B, 0.0f);
      if (H > 2 * OH) std::fill_n(plane + 2 * OH * W * B, (H - 2 * OH) * W * B, 0.0f);
    }
  });
}

}  // namespace

bool max_pool_2x2_fits(const Shape& x, const Pool2dAttrs& a, DType dtype) {
  return dtype == DType::f32 && x.size() == 4 && x[1] % 8 == 0 && a.kernel[0] == 2 &&
         a.kernel[1] == 2 && a.stride[0] == 2 && a.stride[1] == 2 && a.padding[0] == 0 &&
         a.padding[1] == 0;
}

int max_pool_2x2_block(const Tensor& x) {
  if (x.has_layout()) {
    const memory::desc d = dn::desc_of(x);
    if (x.size(1) % 16 == 0 && d == blocked(x.shape(), 16)) return 16;
    if (d == blocked(x.shape(), 8)) return 8;
  }
  return preferred_channel_block(x.size(1));
}

std::vector<Tensor> max_pool_2x2(const Tensor& xin, const Pool2dAttrs& a, int block, bool relu) {
  const Geometry g = geometry(xin.shape(), a, block);
  Tensor x = dn::to_desc(xin, blocked(g.x_shape(), block));
  Tensor y = dn::empty_in(g.y_shape(), DType::f32, blocked(g.y_shape(), block));
  Tensor ws = Tensor::empty({g.blocks(), g.OH, g.OW, block / 8 * (relu ? 3 : 2)}, DType::u8);
  if (block == 16)
    pool_forward<16>(blocked_data(x), blocked_data(y), ws.data<uint8_t>(), g, relu);
  else
    pool_forward<8>(blocked_data(x), blocked_data(y), ws.data<uint8_t>(), g, relu);
  return {dn::finish_output(y), ws};
}

namespace {

// The block of a workspace of these kernels (relu: with the third mask), else 0.
int64_t workspace_block(const Tensor& ws, const Shape& x, const Pool2dAttrs& a, bool relu) {
  if (!ws.defined() || ws.dtype() != DType::u8 || ws.dim() != 4 || x.size() != 4) return 0;
  const int64_t masks = relu ? 3 : 2, block = ws.size(3) / masks * 8;
  if ((block != 8 && block != 16) || x[1] % block != 0) return 0;
  const Shape want = {x[0] * x[1] / block, a.output_size[0], a.output_size[1], block / 8 * masks};
  return ws.shape() == want ? block : 0;
}

}  // namespace

bool is_max_pool_2x2_workspace(const Tensor& ws, const Shape& x, const Pool2dAttrs& a, bool relu) {
  return workspace_block(ws, x, a, relu) != 0;
}

Tensor max_pool_2x2_backward(const Tensor& dyin, const Tensor& ws, const Shape& x,
                             const Pool2dAttrs& a) {
  const bool relu = is_max_pool_2x2_workspace(ws, x, a, true);
  ZENITH_CHECK(relu || is_max_pool_2x2_workspace(ws, x, a, false),
               "[max_pool2d_backward] the workspace is not the AVX2 fast path's (was the AVX2 "
               "fast-path mode changed between forward and backward?)");
  const Geometry g = geometry(x, a, workspace_block(ws, x, a, relu));
  Tensor dy = dn::to_desc(dyin, blocked(g.y_shape(), g.B));
  Tensor dx = dn::empty_in(g.x_shape(), DType::f32, blocked(g.x_shape(), g.B));
  float* pdx = blocked_data(dx);
  if (g.B == 16)
    pool_backward<16>(blocked_data(dy), ws.data<uint8_t>(), pdx, g, relu);
  else
    pool_backward<8>(blocked_data(dy), ws.data<uint8_t>(), pdx, g, relu);
  return dn::finish_output(dx);
}

namespace {

// max_pool2d_relu(x) -> {relu(y), workspace}: zenith's kernel where the window fits (its
// workspace also holds relu's mask), else the decomposition (src/ops/fused.cpp).
std::vector<Tensor> max_pool2d_relu_kernel(const std::vector<Tensor>& in, const Pool2dAttrs& a) {
  if (a.training && max_pool_2x2_fits(in[0].shape(), a, in[0].dtype()))
    return max_pool_2x2(in[0], a, max_pool_2x2_block(in[0]), true);
  dispatch::ForceDecomposition composed(OpId::max_pool2d_relu);
  return dispatch::call<OpId::max_pool2d_relu>(in, a);
}

// max_pool2d_relu_backward(dy, x, workspace) -> dx: zenith's kernel on its workspace, else the
// decomposition (which reads x's values).
std::vector<Tensor> max_pool2d_relu_backward_kernel(const std::vector<Tensor>& in,
                                                    const Pool2dAttrs& a) {
  ZENITH_CHECK(in.size() == 3, "[max_pool2d_relu_backward] expected (dy, x, workspace), got ",
               in.size(), " inputs");
  if (is_max_pool_2x2_workspace(in[2], in[1].shape(), a, true))
    return {max_pool_2x2_backward(in[0], in[2], in[1].shape(), a)};
  dispatch::ForceDecomposition composed(OpId::max_pool2d_relu_backward);
  return dispatch::call<OpId::max_pool2d_relu_backward>(in, a);
}

}  // namespace

ZENITH_REGISTER_KERNEL(max_pool2d_relu, CPU, max_pool2d_relu_kernel);
ZENITH_REGISTER_KERNEL(max_pool2d_relu_backward, CPU, max_pool2d_relu_backward_kernel);
ZENITH_LAYOUT_AWARE(max_pool2d_relu);
ZENITH_LAYOUT_AWARE(max_pool2d_relu_backward);

}  // namespace zenith::cpu
