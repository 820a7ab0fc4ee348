// graph mode's conv2d_relu_max_pool and conv2d_relu_max_pool_backward on the CPU (conv_pool.h).
//
// SeedCNN's first layer (1 or 3 input channels, 32 output channels) spent a large share of its
// step writing and reading its [N, 32, 26, 26] convolution output: oneDNN's convolution, the
// pooling, the pooling's backward writing a dense gradient and the weight gradient reading it.
// Here each pooled pixel's four convolution outputs are made in registers for a block of output
// channels (a vector of 16 channels on AVX-512, 8 on AVX2, matching the nChw16c / nChw8c the
// graph hands the next convolution) from the 4x4 input patch under the window, by broadcast
// FMAs; the window's maximum, the ReLU and the cell that won are all that is kept. The backward
// masks the pooled gradient per window cell and accumulates the 9 x C weight gradient vectors
// in registers over the batch.
//
// On AVX2 (blocks of 8) the forward makes two blocks at a time where the channels pair up:
// a tap's two weight vectors, loaded once, serve the window's four cells (one block a time
// reloaded a weight vector for every FMA: 36 of them do not fit in 16 registers; bench/conv_ops'
// conv1+relu+pool rows).
//
// The kernels are written once with GCC vector types (lanes = the block) in
// conv_pool_kernels.inc and compiled twice, for x86-64-v3 and for AVX-512.
#include "backend/cpu/conv_pool.h"

#include <immintrin.h>

#include <cstring>

#include "backend/cpu/loops.h"
#include "backend/cpu/onednn.h"
#include "backend/cpu/onednn_layout.h"
#include "core/dispatch.h"

namespace zenith::cpu {
namespace {

namespace dn = onednn;
using dnnl::memory;

// N batch, C input channels, H x W input; O output channels, OH x OW convolution output,
// PH x PW pooled output; B channels per block (a vector's lanes).
struct Geometry {
  int64_t N, C, H, W, O, OH, OW, PH, PW, B;
  int64_t blocks() const { return O / B; }
  Shape y_shape() const { return {N, O, PH, PW}; }
};

Geometry geometry(const Conv2dAttrs& a, int64_t block) {
  const Shape& x = a.input_shape;
  const int64_t OH = a.output_shape[2], OW = a.output_shape[3];
  return {x[0], x[1], x[2], x[3], a.weight_shape[0], OH, OW, OH / 2, OW / 2, block};
}

// The kernels, compiled for the build's target (x86-64-v3; a 16-lane vector is two ymm there)
// and for AVX-512: a function carries its target from where it is defined, so the kernel source
// is included twice, once under an AVX-512 target pragma.
#define ZENITH_CONV_POOL_AVX512 0
namespace v3 {
#include "backend/cpu/conv_pool_kernels.inc"
}  // namespace v3
#undef ZENITH_CONV_POOL_AVX512
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq")
#define ZENITH_CONV_POOL_AVX512 1
namespace avx512 {
#include "backend/cpu/conv_pool_kernels.inc"
}  // namespace avx512
#undef ZENITH_CONV_POOL_AVX512
#pragma GCC pop_options

using ForwardFn = void (*)(const float*, const float*, const float*, float*, uint8_t*,
                           const Geometry&, int64_t, int64_t);
using BackwardFn = void (*)(const float*, const float*, const uint8_t*, float*, const Geometry&,
                            int64_t);

struct Kernels {
  ForwardFn forward;
  BackwardFn backward;
};

// Block 16 runs the AVX-512 build where oneDNN's ISA has AVX-512 (its layouts are then
// nChw16c), else the x86-64-v3 one, as block 8 always does.
template <int C>
Kernels kernels_for(int64_t block) {
  if (block == 8) return {v3::forward_block<8, C>, v3::backward_block<8, C>};
  if (onednn_has_avx512()) return {avx512::forward_block<16, C>, avx512::backward_block<16, C>};
  return {v3::forward_block<16, C>, v3::backward_block<16, C>};
}

Kernels kernels(const Geometry& g) {
  switch (g.C) {
    case 1:
      return kernels_for<1>(g.B);
    case 2:
      return kernels_for<2>(g.B);
    case 3:
      return kernels_for<3>(g.B);
    default:
      return kernels_for<4>(g.B);
  }
}

ForwardFn pair_kernel(const Geometry& g) {
  switch (g.C) {
    case 1:
      return v3::forward_block_pair<1>;
    case 2:
      return v3::forward_block_pair<2>;
    case 3:
      return v3::forward_block_pair<3>;
    default:
      return v3::forward_block_pair<4>;
  }
}

memory::desc blocked(const Shape& s, int64_t block) {
  return memory::desc(dn::dims_of(s), memory::data_type::f32,
                      block == 16 ? memory::format_tag::nChw16c : memory::format_tag::nChw8c);
}

// t's float32 values, plain and contiguous.
Tensor plain_f32(const Tensor& t) {
  Tensor p = dn::to_desc(t, dn::plain_desc(t.shape(), DType::f32));
  return p.has_layout() ? flat_physical(p) : p;
}

// A blocked tensor as a flat float buffer over its storage.
float* blocked_data(const Tensor& t) {
  Tensor flat = t.has_layout() ? flat_physical(t) : t;
  return flat.data<float>();
}

}  // namespace

int preferred_channel_block(int64_t channels) {
  return onednn_has_avx512() && channels % 16 == 0 ? 16 : 8;
}

bool conv_relu_max_pool_fits(const Conv2dAttrs& a, DType dtype) {
  const std::vector<int64_t> ones = {1, 1}, zeros = {0, 0};
  return dtype == DType::f32 && a.input_shape.size() == 4 && a.weight_shape.size() == 4 &&
         a.output_shape.size() == 4 && a.weight_shape[2] == 3 && a.weight_shape[3] == 3 &&
         a.stride == ones && a.dilation == ones && a.pad_begin == zeros && a.pad_end == zeros &&
         a.groups == 1 && a.input_shape[1] >= 1 && a.input_shape[1] <= 4 &&
         a.weight_shape[0] % 8 == 0 && a.output_shape[2] >= 2 && a.output_shape[3] >= 2;
}

Shape conv_relu_max_pool_shape(const Conv2dAttrs& a) {
  return {a.output_shape[0], a.output_shape[1], a.output_shape[2] / 2, a.output_shape[3] / 2};
}

std::vector<Tensor> conv_relu_max_pool(const Tensor& xin, const Tensor& win, const Tensor& bin,
                                       const Conv2dAttrs& a, int block) {
  ZENITH_CHECK(conv_relu_max_pool_fits(a, xin.dtype()) && (block == 8 || block == 16) &&
                   a.weight_shape[0] % block == 0,
               "[conv2d_relu_max_pool] no kernel for this convolution (block ", block, ")");
  const Geometry g = geometry(a, block);
  Tensor x = plain_f32(xin), w = plain_f32(win);
  std::vector<float> wp(size_t(g.O * g.C * 9)), bp(size_t(g.O), 0.0f);
  const float* pw = w.data<float>();
  for (int64_t o = 0; o < g.O; ++o)
    for (int64_t k = 0; k < g.C * 9; ++k)
      wp[size_t(((o / g.B) * g.C * 9 + k) * g.B + o % g.B)] = pw[o * g.C * 9 + k];
  if (a.bias) {
    Tensor b = plain_f32(bin);
    std::memcpy(bp.data(), b.data<float>(), sizeof(float) * size_t(g.O));
  }
  Tensor y = dn::empty_in(g.y_shape(), DType::f32, blocked(g.y_shape(), g.B));
  Tensor ws = Tensor::empty({g.N, g.blocks(), g.PH, g.PW, g.B}, DType::u8);
  const ForwardFn f = kernels(g).forward;
  const float* px = x.data<float>();
  float* py = blocked_data(y);
  uint8_t* pws = ws.data<uint8_t>();
  if (g.B == 8 && g.blocks() % 2 == 0) {
    // Two 8-channel blocks a task where the blocks pair up (forward_block_pair).
    const ForwardFn fp = pair_kernel(g);
    const int64_t pairs = g.blocks() / 2;
    parallel_for(g.N * pairs, 1, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t)
        fp(px, wp.data(), bp.data(), py, pws, g, t / pairs, 2 * (t % pairs));
    });
    return {dn::finish_output(y), ws};
  }
  parallel_for(g.N * g.blocks(), 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t)
      f(px, wp.data(), bp.data(), py, pws, g, t / g.blocks(), t % g.blocks());
  });
  return {dn::finish_output(y), ws};
}

bool is_conv_relu_max_pool_workspace(const Tensor& ws, const Conv2dAttrs& a) {
  if (!ws.defined() || ws.dtype() != DType::u8 || ws.dim() != 5 ||
      !conv_relu_max_pool_fits(a, DType::f32))
    return false;
  const int64_t block = ws.size(4);
  if (block != 8 && block != 16) return false;
  const Geometry g = geometry(a, block);
  return g.O % block == 0 && ws.shape() == Shape{g.N, g.blocks(), g.PH, g.PW, g.B};
}

std::vector<Tensor> conv_relu_max_pool_backward(const Tensor& dyin, const Tensor& xin,
                                                const Tensor& ws, const Conv2dAttrs& a) {
  ZENITH_CHECK(is_conv_relu_max_pool_workspace(ws, a),
               "[conv2d_relu_max_pool_backward] the workspace is not conv2d_relu_max_pool's for "
               "this convolution");
  const Geometry g = geometry(a, ws.size(4));
  Tensor x = plain_f32(xin);
  Tensor dy = dn::to_desc(dyin, blocked(g.y_shape(), g.B));
  // One task per block of channels, each over the whole batch in order (the order of the sums is
  // part of the result: backward_block's comment).
  const int64_t taps = g.C * 9 + 1;
  std::vector<float> sums(size_t(g.blocks() * taps * g.B));
  const BackwardFn f = kernels(g).backward;
  const float* px = x.data<float>();
  const float* pdy = blocked_data(dy);
  const uint8_t* pws = ws.data<uint8_t>();
  parallel_for(g.blocks(), 1, [&](int64_t begin, int64_t end) {
    for (int64_t ob = begin; ob < end; ++ob) f(px, pdy, pws, sums.data() + ob * taps * g.B, g, ob);
  });
  Tensor dw = Tensor::empty({g.O, g.C, 3, 3}, DType::f32);
  Tensor db = a.bias ? Tensor::empty({g.O}, DType::f32) : Tensor();
  float* pdw = dw.data<float>();
  float* pdb = a.bias ? db.data<float>() : nullptr;
  for (int64_t ob = 0; ob < g.blocks(); ++ob) {
    const float* s = sums.data() + ob * taps * g.B;
    for (int64_t l = 0; l < g.B; ++l) {
      const int64_t o = ob * g.B + l;
      for (int64_t k = 0; k + 1 < taps; ++k) pdw[o * (taps - 1) + k] = s[k * g.B + l];
      if (pdb) pdb[o] = s[(taps - 1) * g.B + l];
    }
  }
  return {dw, db};
}

namespace {

// (x, weight, bias?) -> {y, workspace}: the fused kernel where the convolution fits, else the
// decomposition (src/ops/fused.cpp).
std::vector<Tensor> conv2d_relu_max_pool_kernel(const std::vector<Tensor>& in,
                                                const Conv2dAttrs& a) {
  if (in.size() >= 2 && conv_relu_max_pool_fits(a, in[0].dtype()) && in[1].dtype() == DType::f32)
    return conv_relu_max_pool(in[0], in[1], in.size() > 2 ? in[2] : Tensor(), a,
                              preferred_channel_block(a.weight_shape[0]));
  dispatch::ForceDecomposition composed(OpId::conv2d_relu_max_pool);
  return dispatch::call<OpId::conv2d_relu_max_pool>(in, a);
}

// (dy, x, weight, bias?, workspace) -> {dw, db?}: the fused kernel on its workspace (weight and
// bias unread), else the decomposition.
std::vector<Tensor> conv2d_relu_max_pool_backward_kernel(const std::vector<Tensor>& in,
                                                         const Conv2dAttrs& a) {
  ZENITH_CHECK(in.size() == 5,
               "[conv2d_relu_max_pool_backward] expected (dy, x, weight, bias?, workspace), got ",
               in.size(), " inputs");
  if (is_conv_relu_max_pool_workspace(in[4], a))
    return conv_relu_max_pool_backward(in[0], in[1], in[4], a);
  dispatch::ForceDecomposition composed(OpId::conv2d_relu_max_pool_backward);
  return dispatch::call<OpId::conv2d_relu_max_pool_backward>(in, a);
}

}  // namespace

ZENITH_REGISTER_KERNEL(conv2d_relu_max_pool, CPU, conv2d_relu_max_pool_kernel);
ZENITH_REGISTER_KERNEL(conv2d_relu_max_pool_backward, CPU, conv2d_relu_max_pool_backward_kernel);
ZENITH_LAYOUT_AWARE(conv2d_relu_max_pool);
ZENITH_LAYOUT_AWARE(conv2d_relu_max_pool_backward);

}  // namespace zenith::cpu
