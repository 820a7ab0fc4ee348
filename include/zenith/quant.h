// Quantized weights: GGML's block formats, byte for byte as llama.cpp lays them out, so blocks
// read from or written to a GGUF file are used unchanged. A block holds a fixed run of a row's
// elements and its own scales:
//   q8_0  32 elements in 34 bytes: f16 d, int8 q[32]                       x = d q
//   q4_0  32 elements in 18 bytes: f16 d, 16 bytes of nibbles              x = d (q - 8)
//         (byte j holds element j in its low nibble and element j + 16 in its high one)
//   q4_k 256 elements in 144 bytes: f16 d, f16 dmin, 12 bytes of 6-bit scale/min pairs for the
//         8 sub-blocks of 32, 128 bytes of nibbles                         x = d sc q - dmin m
//         (byte 32 c + l holds element 64 c + l low and 64 c + 32 + l high)
// nf4 is QLoRA's 4-bit NormalFloat with double quantization (bitsandbytes' scheme, zenith's bytes;
// not a GGML type, so GGUF files cannot hold it): 64 elements per block, x = level[q] absmax,
// level the 16 NF4 values; the blocks' absmax are stored as int8 codes, absmax = offset + s c,
// with one f32 s per 256 blocks of a row and one f32 offset (the absmax mean) per row. A row of
// n elements, nb = n / 64 blocks, G = ceil(nb / 256) groups:
//   nb bytes of int8 codes, 32 nb bytes of nibbles (byte j: element 2j high, 2j + 1 low), G f32
//   scales, f32 offset                                  about 4.13 bits per element
// Quantized weights are u8 tensors of blocks plus a format, not a DType: a type of 4.5 bits per
// element would change every storage-size computation.
#pragma once

#include <cstdint>
#include <string>

#include "zenith/tensor.h"

namespace zenith {

enum class QuantFormat : uint8_t { q8_0, q4_0, q4_k, nf4 };

int64_t quant_block_elems(QuantFormat f);  // 32, 32, 256, 64
int64_t quant_block_bytes(QuantFormat f);  // 34, 18, 144, 33 (nf4: plus a row's tail)
const char* quant_name(QuantFormat f);     // "q8_0", "q4_0", "q4_k", "nf4"
// Accepts the names above, case-insensitively ("Q4_K" as GGUF spells it); throws naming them.
QuantFormat quant_from_name(const std::string& name);
// Bytes of one row of n elements (n a multiple of the block's elements).
int64_t quant_row_bytes(QuantFormat f, int64_t n);
// The 16 NF4 levels of the QLoRA paper (Dettmers et al. 2023, appendix E), ascending.
extern const float kNf4Levels[16];

// One row of n floats (n a multiple of quant_block_elems) to n / elems blocks, and back.
void quantize_row(QuantFormat f, const float* x, int64_t n, uint8_t* out);
void dequantize_row(QuantFormat f, const uint8_t* in, int64_t n, float* out);

// A linear layer's weight [out, in] as blocks: u8 tensor [out, quant_row_bytes(format, in)].
struct QuantizedWeight {
  Tensor blocks;
  QuantFormat format = QuantFormat::q8_0;
  int64_t out_features = 0, in_features = 0;
};

// weight [out, in] (any float dtype; in a multiple of the format's block) -> its blocks.
QuantizedWeight quantize_weight(const Tensor& weight, QuantFormat f);
// The float32 weight [out, in] the blocks stand for.
Tensor dequantize_weight(const QuantizedWeight& w);
// Checks blocks' dtype and shape against format and features; throws naming `what`.
void check_quantized_weight(const QuantizedWeight& w, const std::string& what);

}  // namespace zenith
