// Attention over a paged KV cache (vLLM's PagedAttention, for the LLM engine in src/serve/llm):
// the step's packed tokens, each reading its own sequence's keys and values through a block
// table. Validates shapes, dtypes and every index a token will read, then dispatches
// paged_attention; the CPU kernel is src/backend/cpu/paged_attention.cpp. Inference only: the
// op records a node whose backward throws, so a training graph through it fails by name.
// H query heads, Hkv kv heads, N tokens, D head dim, S sequences, B blocks of P positions; the
// caches are [B, Hkv, P, D] (vLLM's "HND"), float32 / float64 as q, or bfloat16 / float16 under
// a float32 q (a serving pool at half the bytes per position).
#include <cmath>

#include "ops/op_utils.h"

namespace zenith::ops {
namespace {

constexpr const char* kOp = "paged_attention";

void check_index(const Tensor& t, int64_t dim, const char* name) {
  ZENITH_CHECK(t.defined() && t.dtype() == DType::i32 && t.dim() == dim, "[", kOp, "] ", name,
               " must be an int32 tensor of ", dim, " dims, got ",
               t.defined() ? dtype_name(t.dtype()) : "undefined", " ",
               t.defined() ? shape_str(t.shape()) : "");
}

// Every (sequence, position) a token reads maps to a block of the cache.
void check_tables(const Tensor& table, const Tensor& seq, const Tensor& pos, int64_t blocks,
                  int64_t block_size) {
  const int64_t sequences = table.size(0), width = table.size(1);
  const int32_t* t = table.data<int32_t>();
  const int32_t* s = seq.data<int32_t>();
  const int32_t* p = pos.data<int32_t>();
  for (int64_t i = 0; i < seq.numel(); ++i) {
    ZENITH_CHECK(s[i] >= 0 && s[i] < sequences, "[", kOp, "] seq_of_token[", i, "] = ", s[i],
                 " is not a row of block_table ", shape_str(table.shape()));
    ZENITH_CHECK(p[i] >= 0 && p[i] < width * block_size, "[", kOp, "] positions[", i, "] = ", p[i],
                 " is outside the ", width, " blocks of ", block_size,
                 " positions that block_table holds per sequence");
    for (int64_t b = 0; b <= p[i] / block_size; ++b) {
      const int32_t block = t[s[i] * width + b];
      ZENITH_CHECK(block >= 0 && block < blocks, "[", kOp, "] block_table[", s[i], ", ", b,
                   "] = ", block, " is not one of the cache's ", blocks, " blocks");
    }
  }
}

}  // namespace

Tensor paged_attention(const Tensor& q_in, const Tensor& key_cache, const Tensor& value_cache,
                       const Tensor& block_table, const Tensor& seq_of_token,
                       const Tensor& positions, std::optional<double> scale) {
  ZENITH_CHECK(q_in.defined() && (q_in.dtype() == DType::f32 || q_in.dtype() == DType::f64), "[",
               kOp, "] q must be float32 (or float64, the reference), got ",
               q_in.defined() ? dtype_name(q_in.dtype()) : "undefined");
  ZENITH_CHECK(q_in.dim() == 4 && q_in.size(0) == 1, "[", kOp, "] q must be [1, H, N, D], got ",
               shape_str(q_in.shape()));
  const int64_t heads = q_in.size(1), n = q_in.size(2), d = q_in.size(3);
  ZENITH_CHECK(key_cache.defined() && value_cache.defined() && key_cache.dim() == 4 &&
                   key_cache.shape() == value_cache.shape(),
               "[", kOp, "] key_cache and value_cache must both be [blocks, Hkv, block_size, D]");
  const DType cache = key_cache.dtype();
  const bool half_cache =
      q_in.dtype() == DType::f32 && (cache == DType::bf16 || cache == DType::f16);
  ZENITH_CHECK(value_cache.dtype() == cache && (cache == q_in.dtype() || half_cache), "[", kOp,
               "] the caches must have q's dtype ", dtype_name(q_in.dtype()),
               " (or both bfloat16 / float16 under a float32 q), got ", dtype_name(cache), " and ",
               dtype_name(value_cache.dtype()));
  const int64_t kv_heads = key_cache.size(1);
  ZENITH_CHECK(key_cache.size(3) == d && kv_heads > 0 && heads % kv_heads == 0, "[", kOp, "] q ",
               shape_str(q_in.shape()), " does not fit caches ", shape_str(key_cache.shape()),
               " (head dim D equal, H a multiple of Hkv)");
  check_index(block_table, 2, "block_table");
  check_index(seq_of_token, 1, "seq_of_token");
  check_index(positions, 1, "positions");
  ZENITH_CHECK(seq_of_token.size(0) == n && positions.size(0) == n, "[", kOp,
               "] seq_of_token and positions must have one entry per token (", n, "), got ",
               seq_of_token.size(0), " and ", positions.size(0));
  const Tensor table = block_table.contiguous(), seq = seq_of_token.contiguous(),
               pos = positions.contiguous();
  check_tables(table, seq, pos, key_cache.size(0), key_cache.size(2));
  const Tensor q = detail::plain(q_in).contiguous();
  const Tensor k = detail::plain(key_cache).contiguous();
  const Tensor v = detail::plain(value_cache).contiguous();
  const PagedAttentionAttrs attrs{scale.value_or(1.0 / std::sqrt(double(d)))};
  Tensor out = dispatch::call1<OpId::paged_attention>({q, k, v, table, seq, pos}, attrs);
  if (autograd::needs_grad({q_in, key_cache, value_cache}))
    autograd::record(kOp, {q_in, key_cache, value_cache}, {out},
                     [](const std::vector<Tensor>&) -> std::vector<Tensor> {
                       ZENITH_FAIL("[", kOp,
                                   "] is inference-only and has no gradient; use "
                                   "scaled_dot_product_attention to train");
                     });
  return out;
}

}  // namespace zenith::ops
