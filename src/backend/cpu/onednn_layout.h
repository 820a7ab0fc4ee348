// Layout tensors (activations kept in oneDNN's blocked format between oneDNN ops), as seen by
// kernels that never include oneDNN: elementwise ops can treat such tensors as flat arrays.
//
// A layout tensor never has padding (zenith only keeps a blocked format whose physical size
// equals numel), so any elementwise f applied to its physical elements is f applied to the
// logical tensor, provided every operand shares the same layout:
//
//   if (cpu::is_layout(x)) return {cpu::with_layout_of(unary(cpu::flat_physical(x)), x)};
//
// Such a kernel declares ZENITH_LAYOUT_AWARE("op") (core/dispatch.h); kernels that do not are
// given plain inputs by the dispatcher.
#pragma once

#include <cstdint>

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

// Counters of the oneDNN backend, for tests and benchmarks.
struct OnednnStats {
  int64_t cache_hits = 0;    // primitive (descriptor) cache
  int64_t cache_misses = 0;
  int64_t reorders = 0;      // format conversions executed (activations, weights, gradients)
  double reorder_ms = 0.0;   // time spent in them
};
OnednnStats onednn_stats();
void reset_onednn_stats();
// Keep activations in oneDNN's blocked layouts between oneDNN ops (default on). When off, every
// oneDNN op returns plain tensors (reordering internally), which tests use as a reference.
void set_keep_layout(bool keep);
bool keep_layout();

}  // namespace zenith::cpu
