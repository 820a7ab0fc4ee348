// Quantized weights: GGML's block formats, byte for byte as llama.cpp lays them out, so blocks
// read from or written to a GGUF file are used unchanged. A block holds a fixed run of a row's
// elements and its own scales:
//   q8_0  32 elements in 34 bytes: f16 d, int8 q[32]                       x = d q
//   q4_0  32 elements in 18 bytes: f16 d, 16 bytes of nibbles              x = d (q - 8)
//         (byte j holds element j in its low nibble and element j + 16 in its high one)
//   q4_k 256 elements in 144 bytes: f16 d, f16 dmin, 12 bytes of 6-bit scale/min pairs for the
//         8 sub-blocks of 32, 128 bytes of nibbles                         x = d sc q - dmin m
//         (byte 32 c + l holds element 64 c + l low and 64 c + 32 + l high)
// nf4 is QLoRA's 4-bit NormalFloat with double quantization, bitsandbytes' scheme
// (quantize_4bit(nf4, blocksize 64, compress_statistics=True)) applied to each row as to a tensor
// of its own; not a GGML type, so GGUF files cannot hold it. 64 elements per block, each the
// nearest NF4 level of x / absmax (the block's exact absmax), x = level[q] absmax'. The absmax are
// stored in 8 bits: offset = their mean, and each group of 256 blocks quantizes absmax - offset
// to the nearest value of bitsandbytes' dynamic map (kDynamicMap) times the group's largest
// |absmax - offset|, absmax' = kDynamicMap[c] scale + offset. A row of n elements, nb = n / 64
// blocks, G = ceil(nb / 256) groups:
//   nb bytes of codes c, 32 nb bytes of nibbles (byte j: element 2j high, 2j + 1 low), G f32
//   scales, f32 offset      4 + 8 / 64 + (32 G + 32) / n bits per element (4.16 at n = 2048)
// nf4_f32 is nf4 without double quantization (bitsandbytes' compress_statistics=False,
// transformers' bnb_4bit_use_double_quant=False): the same levels and nibbles, each block's exact
// absmax kept as an f32. A row: 4 nb bytes of f32 absmax, then 32 nb bytes of nibbles; 36 bytes per
// 64 elements, 4.5 bits per element.
// Quantized weights are u8 tensors of blocks plus a format, not a DType: a type of 4.5 bits per
// element would change every storage-size computation.
#pragma once

#include <cstdint>
#include <string>

#include "zenith/tensor.h"

namespace zenith {

// Values are stored (op attributes, a quantized model's layer list by name): append only.
enum class QuantFormat : uint8_t { q8_0, q4_0, q4_k, nf4, nf4_f32 };

int64_t quant_block_elems(QuantFormat f);  // 32, 32, 256, 64, 64
int64_t quant_block_bytes(QuantFormat f);  // 34, 18, 144, 33 (nf4: plus a row's tail), 36
const char* quant_name(QuantFormat f);     // "q8_0", "q4_0", "q4_k", "nf4", "nf4_f32"
// nf4 with or without double quantization: NormalFloat levels decoded to float (no integer dot).
inline bool is_nf4(QuantFormat f) { return f == QuantFormat::nf4 || f == QuantFormat::nf4_f32; }
// Accepts the names above, case-insensitively ("Q4_K" as GGUF spells it); throws naming them.
QuantFormat quant_from_name(const std::string& name);
// Bytes of one row of n elements (n a multiple of the block's elements).
int64_t quant_row_bytes(QuantFormat f, int64_t n);
// The 16 NF4 levels of the QLoRA paper (Dettmers et al. 2023, appendix E), ascending.
extern const float kNf4Levels[16];
// bitsandbytes' 8-bit dynamic map, create_dynamic_map(signed=True) as its float32 values, ascending
// (-0.99296874 ... 0 ... 1): nf4's double quantization codes its absmax with it.
extern const float kDynamicMap[256];

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
