// q4_0, q8_0 and q4_K weights repacked for the SIMD kernels, the idea of ggml's CPU backend (its
// block_q4_0x8): 8 rows interleaved block by block, so that one 256-bit register holds a
// 4-element slice of 8 rows and one byte dot product against the activations' 4 bytes, broadcast,
// computes it. The 8 rows' sums land in the 8 lanes of one vector and are stored as they are (no
// horizontal sum per row), which is why this beats a row at a time (~4-5 cycles of arithmetic per
// 32-weight block there, the decode step compute-bound).
//
// Layout, for out % 8 == 0: row groups g of 8 rows, each the blocks b of 32 in order:
//   q4_0, 144 bytes: 8 f16 scales (rows 8g..8g+7), then 4 chunks c of 32 bytes: byte 4r + t of
//     chunk c holds element 8c + t of row 8g + r in its low nibble, element 8c + 4 + t in its high.
//   q8_0, 272 bytes: 8 f16 scales, then 8 chunks c of 32 bytes: byte 4r + t of chunk c holds
//     element 4c + t of row 8g + r plus 128 (unsigned, for vpdpbusd; the kernel subtracts
//     128 sum(a)); AVX2 makes them signed again (its 16-bit pair sums would saturate on them).
//   q4_K, per super-block of 256, 1152 bytes: 8 f16 d, 8 f16 dmin, 64 bytes (byte 8j + r: the low
//     4 bits of row r's scale of sub-block j, low nibble, and of its min, high), 32 bytes (their
//     top 2 bits: byte (8j + r) % 32, nibble j / 4, scale's bits 0-1 and min's 2-3), then the 8
//     sub-blocks of 32 as 4 chunks each, q4_0's: so a few vector ops give a sub-block's 8 scales
//     as lanes, and the nibbles meet the activations as q4_0's do (unsigned, start 0).
// The byte map is core's (core/quant_x8.h). An inference process holds its weights in this
// layout (pack_for_inference: blocks [out / 8, 8 row_bytes]) and the kernel reads them as they
// are; a weight in GGML's layout met with grad mode off (an evaluation during training, a model
// not packed) gets a private copy, made once when the kernel first meets its storage.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/cpu/quant_kernels.h"
#include "zenith/tensor.h"

namespace zenith::cpu {

// Bytes of 8 rows x 32 elements (q4_K: an eighth of its 8 rows x 256).
constexpr int64_t x8_block_bytes(QuantFormat f) { return f == QuantFormat::q8_0 ? 272 : 144; }

// Whether weights of this format and row count take the repacked path on `isa` (q4_K's `in` is a
// multiple of 256: the quantizer stores other rows as q4_0).
inline bool x8_applies(QuantIsa isa, QuantFormat f, int64_t out) {
  if (out <= 0 || out % 8 != 0) return false;
  return (f == QuantFormat::q4_0 || f == QuantFormat::q8_0 || f == QuantFormat::q4_k) &&
         isa != QuantIsa::scalar;
}

// w [out, in] as rows of f (q4_0, q8_0 or q4_k) -> the layout above, out * row bytes.
void repack_x8(QuantFormat f, const uint8_t* w, int64_t out, int64_t in, uint8_t* packed);

// The repacked copy of `blocks` (a contiguous u8 tensor of rows of f [out, in]), made on the
// first call for its storage and kept until that storage is freed. Blocks are read-only once a
// kernel has used them (a frozen weight); writing into them afterwards would leave a stale copy.
std::shared_ptr<const std::vector<uint8_t>> x8_copy(const Tensor& blocks, QuantFormat f,
                                                    int64_t out, int64_t in);

// Forgets the copy of `blocks`, if any (training resumed after an evaluation: no second copy).
void x8_drop(const Tensor& blocks);
// Bytes the private copies of live weights hold (0 in a process whose weights are packed).
int64_t x8_cached_bytes();

// The per-ISA kernels on repacked weights: row groups [g0, g1) of p.packed against p.a, format
// p.format.
void quant_groups_x8_avx2(const QuantRows& p, int64_t g0, int64_t g1);
void quant_groups_x8_avx512_vnni(const QuantRows& p, int64_t g0, int64_t g1);

}  // namespace zenith::cpu
