// The paged attention kernel (the op of src/ops/paged_attention.cpp): each token's query heads
// against its own sequence's keys and values, read in place from the cache's blocks through the
// block table. Per (token, kv head) item, the blocks stream by with a running max and sum (an
// online softmax, FlashAttention's tiling with the cache's block as the tile), so no score row
// longer than a block exists. Every item is reduced in one fixed order (blocks in position
// order, each dot product in the ISA's lanes then its tail), whichever thread runs it and
// whatever other tokens share the call: a token's output is the same alone or batched.
// One path per instruction set, chosen at run time: AVX-512, AVX2 and a scalar reference. The
// cache is float32 or, under a float32 query, bfloat16 / float16 (half the bytes per position),
// widened exactly as each vector is loaded (a shift for bfloat16, vcvtph2ps for float16); the
// arithmetic and its order are the float32 cache's.
// H query heads, Hkv kv heads (G = H / Hkv), N tokens, D head dim, P positions per block.
#pragma once

#include <cstdint>

#include "zenith/dtype.h"

namespace zenith::cpu {

enum class PagedIsa : uint8_t { scalar, avx2, avx512 };

PagedIsa paged_isa();  // the fastest path this CPU runs
bool paged_isa_supported(PagedIsa isa);
const char* paged_isa_name(PagedIsa isa);  // "scalar", "avx2", "avx512"

// A cache element as float (or double): bfloat16 and float16 widen exactly.
inline float widen(float x) { return x; }
inline double widen(double x) { return x; }
inline float widen(BFloat16 x) { return bf16_to_float(x.bits); }
inline float widen(Half x) { return half_to_float(x.bits); }

// One call's operands, contiguous: q, out [1, H, N, D]; k, v [blocks, Hkv, P, D] of C (T, or
// BFloat16 / Half under a float T); table int32 [S, width]; seq, pos int32 [N] (validated by
// the op).
template <typename T, typename C = T>
struct PagedArgs {
  const T* q;
  const C* k;
  const C* v;
  T* out;
  const int32_t* table;
  const int32_t* seq;
  const int32_t* pos;
  int64_t heads, kv_heads, n, d, block_size, width;
  T scale;
};

// Items are (token i, kv head j) as i Hkv + j; each computes the G query heads of kv head j.
// `scratch` holds paged_scratch(a) values.
template <typename T, typename C>
int64_t paged_scratch(const PagedArgs<T, C>& a) {
  const int64_t g = a.heads / a.kv_heads;
  return g * (a.block_size + a.d + 2);
}
// C is float, BFloat16 or Half (instantiated in the kernel's sources); the double path is the
// reference.
void paged_item_scalar(const PagedArgs<double>& a, int64_t item, double* scratch);
template <typename C>
void paged_item_scalar(const PagedArgs<float, C>& a, int64_t item, float* scratch);
template <typename C>
void paged_item_avx2(const PagedArgs<float, C>& a, int64_t item, float* scratch);
template <typename C>
void paged_item_avx512(const PagedArgs<float, C>& a, int64_t item, float* scratch);

// Every item of a call on `isa` (float32 q), over the claiming pool when the call has enough
// work. C is float, BFloat16 or Half.
template <typename C>
void paged_attention_f32(PagedIsa isa, const PagedArgs<float, C>& a);

}  // namespace zenith::cpu
