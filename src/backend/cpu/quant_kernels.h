// Linear layers on quantized weights (GGML's q8_0, q4_0, q4_K blocks; include/zenith/quant.h):
// y = x W^T with W read as blocks. The activations are quantized first, per block of 32, to int8
// with a float scale (as llama.cpp's q8 dot products do), so the inner loop multiplies int8 by
// int8 (q8_0) or 4-bit by int8 (q4_0, q4_K) in integer arithmetic and scales once per block.
// One path per instruction set, chosen at run time: AVX-512 VNNI (vpdpbusd), AVX2 (vpmaddubsw),
// and a scalar reference that the others are tested against.
#pragma once

#include <cstdint>

#include "zenith/quant.h"

namespace zenith::cpu {

enum class QuantIsa : uint8_t { scalar, avx2, avx512_vnni };

// The fastest path this CPU runs; a name for banners and bench output.
QuantIsa quant_isa();
bool quant_isa_supported(QuantIsa isa);
const char* quant_isa_name(QuantIsa isa);  // "scalar", "avx2", "avx512_vnni"

// 32 activations as int8 q with x ~ d q; dsum = d * sum(q) (q4_K's offset term); off[l] =
// -8 (q[4l] + ... + q[4l + 3]), q4_0's offset (its weights are nibbles n with w = d (n - 8)) in
// the lanes of a byte dot product, which starts from it instead of zero; off_sum = off[0] + ... +
// off[7], the same for the repacked kernels (quant_repack.h), which sum a block in one lane.
struct ActBlock {
  float d, dsum;
  int8_t q[32];
  int32_t off[8];
  int32_t off_sum;
};
void quantize_activations(const float* x, int64_t n, ActBlock* out);  // n % 32 == 0

// q4_K's 6-bit scale and offset of sub-block j (0-7) from its 12 packed bytes.
inline void q4k_scale_min(const uint8_t* packed, int j, int& sc, int& mn) {
  if (j < 4) {
    sc = packed[j] & 63, mn = packed[j + 4] & 63;
  } else {
    sc = (packed[j + 4] & 0xF) | ((packed[j - 4] >> 6) << 4);
    mn = (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4);
  }
}

// y [m, out] = x [m, in] W^T for W [out, in] as blocks of format f, rows of quant_row_bytes(f,
// in) bytes; x and y rows contiguous. Threads over the claiming pool (claim_pool.h). x8: the
// weight repacked (quant_repack.h), used where x8_applies; else null.
void quant_linear(QuantIsa isa, QuantFormat f, const float* x, int64_t m, int64_t in,
                  const uint8_t* w, int64_t out, float* y, const uint8_t* x8 = nullptr);

// The per-ISA row kernels: rows [o0, o1) of W against the m quantized activation rows a (in / 32
// blocks each), into y [m, out]; packed: W repacked (quant_repack.h) or null.
struct QuantRows {
  QuantFormat format;
  const uint8_t* w;
  int64_t row_bytes, blocks32, out;
  const ActBlock* a;
  int64_t m;
  float* y;
  const uint8_t* packed = nullptr;
};
void quant_rows_scalar(const QuantRows& p, int64_t o0, int64_t o1);
void quant_rows_avx2(const QuantRows& p, int64_t o0, int64_t o1);
void quant_rows_avx512_vnni(const QuantRows& p, int64_t o0, int64_t o1);

}  // namespace zenith::cpu
