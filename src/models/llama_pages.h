// A loaded model's weights moved into one block of transparent huge pages (src/models/
// llama_pages.cpp). Decoding reads every weight once per token, a stream far larger than the
// TLBs cover: on 4 KiB pages each page of the stream costs a page walk, and weights allocated one
// by one (1-3 MiB each at the 110M shape) never fill a 2 MiB huge page on their own.
#pragma once

#include <cstdint>

#include "zenith/llama.h"

namespace zenith::models {

// Below this many bytes of weights a model is left where it is (it fits the caches).
constexpr int64_t kHugePageMinBytes = int64_t(4) << 20;

// Copies each parameter of `model` and each quantized weight's blocks into one mapping advised
// for transparent huge pages (madvise MADV_HUGEPAGE), in model order, and points the tensors at
// the copies (values, shapes and parameter identity unchanged; tensors sharing a storage keep
// sharing it). A tensor released later returns its pages to the system; the mapping goes with
// the last. Skips a storage some other tensor also holds, and the whole model below `min_bytes`
// or where the mapping fails. Returns the bytes moved.
int64_t place_weights_in_huge_pages(Llama& model, int64_t min_bytes = kHugePageMinBytes);

}  // namespace zenith::models
