// Layout tensors (activations kept in oneDNN's blocked format between oneDNN ops), as seen by
// kernels that never include oneDNN: elementwise ops can treat such tensors as flat arrays.
//
// A layout tensor never has padding (zenith only keeps a blocked format whose physical size
// equals numel), so any elementwise f applied to its physical elements is f applied to the
// logical tensor, provided every operand shares the same layout:
//
//   if (cpu::is_layout(x)) return {cpu::with_layout_of(unary(cpu::flat_physical(x)), x)};
//
// Such a kernel declares ZENITH_LAYOUT_AWARE(op) (core/dispatch.h); kernels that do not are
// given plain inputs by the dispatcher. layout_elementwise<kernel> does all of it for a plain
// elementwise kernel:
//
//   ZENITH_REGISTER_KERNEL(relu, CPU, layout_elementwise<unary_kernel<Relu>>);
//   ZENITH_LAYOUT_AWARE(relu);
#pragma once

#include <cstdint>
#include <string>

#include "core/dispatch.h"
#include "zenith/tensor.h"

namespace zenith::cpu {

// True when `t` holds its data in a backend (oneDNN) layout.
bool is_layout(const Tensor& t);
// True when a and b are both layout tensors with the same shape, dtype and physical format.
bool same_layout(const Tensor& a, const Tensor& b);
// The physical elements of a layout tensor as a plain contiguous 1-d tensor over its storage.
Tensor flat_physical(const Tensor& t);
// A tensor with the shape and layout of `like` over the storage of `flat` (a contiguous tensor
// of like.numel() elements, e.g. made by an elementwise kernel from flat_physical(like)).
Tensor with_layout_of(const Tensor& flat, const Tensor& like);

// `t` (same shape, plain) reordered into the layout of `like` (counted as a reorder).
Tensor to_layout_of(const Tensor& t, const Tensor& like);

// Runs the elementwise kernel K on layout tensors. When all operands share one dtype and each is
// a layout tensor of one format, a same-shape plain tensor (reordered into that format) or a 0-d
// scalar, K sees flat physical views and its first output comes back in that format; otherwise
// layout operands are made plain. Without layout operands it is K itself.
using ElementwiseKernel = std::vector<Tensor> (*)(const std::vector<Tensor>&, const NoAttrs&);
template <ElementwiseKernel K>
std::vector<Tensor> layout_elementwise(const std::vector<Tensor>& in, const NoAttrs& a) {
  const Tensor* like = nullptr;
  for (auto& t : in)
    if (is_layout(t)) like = like ? like : &t;
  if (!like) return K(in, a);
  bool flat = true;
  for (auto& t : in)
    flat = flat && (!t.defined() || (t.dtype() == like->dtype() &&
                                     (t.dim() == 0 || same_layout(t, *like) ||
                                      (!is_layout(t) && t.shape() == like->shape()))));
  std::vector<Tensor> args = in;
  for (auto& t : args) {
    if (!t.defined() || t.dim() == 0) continue;
    if (!flat)
      t = is_layout(t) ? dispatch::call1<OpId::to_plain>({t}) : t;
    else
      t = flat_physical(is_layout(t) ? t : to_layout_of(t, *like));
  }
  std::vector<Tensor> out = K(args, a);
  if (flat) out[0] = with_layout_of(out[0], *like);
  return out;
}

// Counters of the oneDNN backend, for tests and benchmarks.
struct OnednnStats {
  int64_t cache_hits = 0;  // primitive (descriptor) cache
  int64_t cache_misses = 0;
  int64_t reorders = 0;     // format conversions executed (activations, weights, gradients)
  double reorder_ms = 0.0;  // time spent in them
};
OnednnStats onednn_stats();
void reset_onednn_stats();
// Keep activations in oneDNN's blocked layouts between oneDNN ops (default on). When off, every
// oneDNN op returns plain tensors (reordering internally), which tests use as a reference.
void set_keep_layout(bool keep);
bool keep_layout();
// float32 convolution algorithm: "auto" (default: Winograd for 3x3 stride-1 convs with 64..256
// channels in and out at batch >= 8, a fixed rule so runs are reproducible; direct otherwise),
// "direct", or "winograd" (wherever oneDNN supports it: 3x3, stride 1, channels in multiples of
// 16). ZENITH_CONV_ALGO sets the default.
void set_conv_algorithm(const std::string& name);
const std::string& conv_algorithm();
// zenith's own float32 kernels where oneDNN's AVX2 ones are weak: the weight gradient of convs
// with < 8 input channels (oneDNN pads them to 8), that of 3-wide stride-1 convs with channels in
// multiples of 8 (nChw8c), and 2x2 stride-2 max pooling on nChw8c.
// "auto" (default): where oneDNN runs without AVX-512 (its AVX-512 kernels are fine); "on":
// always, converting to nChw8c where needed (tests); "off": never. ZENITH_AVX2_FAST_PATHS sets
// the default.
void set_avx2_fast_paths(const std::string& mode);
bool use_avx2_fast_paths();
// Whether oneDNN's effective ISA (ONEDNN_MAX_CPU_ISA caps it) has AVX-512: where zenith's own
// kernels take their 512-bit paths too, so a capped run behaves as an AVX2-only host.
bool onednn_has_avx512();

}  // namespace zenith::cpu
