// The inference layout of q4_0, q8_0 and q4_K weights: 8 rows interleaved block by block, the
// layout the CPU's repacked kernels read (src/backend/cpu/quant_repack.h has its byte map; ggml's
// CPU backend has the idea, block_q4_0x8). It holds the GGML blocks' bytes rearranged (q8_0's
// codes plus 128, q4_K's 6-bit scales and mins regrouped), the same count, so a weight converts
// both ways bit for bit.
//
// A QuantizedWeight (zenith/quant.h) in this layout has blocks of shape [out / 8, 8 row_bytes]
// (a row group per row) instead of [out, row_bytes]: the shape says which layout the bytes are
// in, so the op, dequantize_weight and check_quantized_weight need no other flag. Only an
// inference process converts (pack_for_inference, src/models/llama_quant.h), once per weight,
// and then holds the weight once; readers that need GGML's bytes (a GGUF or safetensors export)
// take quant_to_ggml. Training keeps GGML's layout.
#pragma once

#include <cstdint>

#include "zenith/quant.h"

namespace zenith {

// Whether f and out admit the layout: q4_0, q8_0 or q4_k, out a positive multiple of 8.
bool quant_x8_fits(QuantFormat f, int64_t out);
// Whether w's blocks are in the layout (by their shape).
bool quant_is_x8(const QuantizedWeight& w);
// Whether this CPU's kernels read f [out, *] in the layout (AVX2 or AVX-512 VNNI): asked of the
// CPU backend, which registers the answer at start-up.
bool quant_x8_preferred(QuantFormat f, int64_t out);
void set_quant_x8_probe(bool (*probe)(QuantFormat f, int64_t out));  // the backend's

// Rows [out, in] of GGML blocks of f <-> the layout; out % 8 == 0, out * quant_row_bytes(f, in)
// bytes each way.
void quant_x8_pack(QuantFormat f, const uint8_t* w, int64_t out, int64_t in, uint8_t* packed);
void quant_x8_unpack(QuantFormat f, const uint8_t* packed, int64_t out, int64_t in, uint8_t* w);

// w in the layout (quant_x8_fits; a weight in it already is returned as it is), and w in GGML's
// (a weight in GGML's is returned as it is, sharing its blocks).
QuantizedWeight quant_to_x8(const QuantizedWeight& w);
QuantizedWeight quant_to_ggml(const QuantizedWeight& w);
// quant_to_x8 rearranging w's bytes where they are (a row group's 8 rows take the same bytes in
// both layouts), when w alone holds its contiguous blocks: the weight keeps its memory (the
// loader's huge pages) and needs no second copy, even for a moment. Else a copy, as quant_to_x8.
// In place, w's bytes are no longer GGML's: the caller replaces w with the result at once.
QuantizedWeight quant_to_x8_in_place(const QuantizedWeight& w);

}  // namespace zenith
