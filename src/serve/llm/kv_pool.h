// The paged KV cache: keys and values of every layer in fixed-size blocks of positions, handed
// to sequences through block tables. Full blocks can be published under a hash chained over
// every token before them (and the adapter), so a later request with the same prefix takes them
// instead of computing them again (automatic prefix caching). A block nobody uses any more but
// that holds a published prefix stays cached until a fresh block is needed; then the least
// recently released one is reused. Each layer's keys (and values) are one tensor
// [blocks, Hkv, block_size, D] (vLLM's "HND": a block's positions of one kv head are contiguous,
// so attention streams them in one run) of float32, or bfloat16 / float16 at half the bytes per
// position (twice the tokens in the same memory; attention widens them as it reads).
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "zenith/dtype.h"
#include "zenith/llama_config.h"
#include "zenith/tensor.h"

namespace zenith::serve::llm {

class KvPool {
 public:
  // As many blocks of `block_size` positions as fit in `bytes` (K and V of every layer in
  // `dtype`: f32, bf16 or f16).
  KvPool(const models::LlamaConfig& config, int64_t bytes, int64_t block_size,
         DType dtype = DType::f32);
  static int64_t bytes_per_block(const models::LlamaConfig& config, int64_t block_size,
                                 DType dtype = DType::f32);

  int64_t num_blocks() const { return num_blocks_; }
  int64_t block_size() const { return block_size_; }
  int64_t kv_heads() const { return kv_heads_; }
  int64_t head_dim() const { return head_dim_; }
  DType dtype() const { return dtype_; }
  // Blocks a new allocation can take: free ones and cached ones nobody uses.
  int64_t available() const { return int64_t(free_.size() + lru_.size()); }
  int64_t used() const { return num_blocks_ - available(); }

  // A block for one sequence (reference count 1), or -1 when none is available.
  int64_t allocate();
  // Drops one reference; at zero a published block becomes cached, another one free.
  void release(int64_t block);
  // The block published under `hash` holding `tokens` (its reference count raised), if any.
  std::optional<int64_t> lookup(uint64_t hash, const std::vector<int64_t>& tokens);
  // `block` (full, its keys and values written) holds `tokens` after the prefix `hash` chains.
  void publish(int64_t block, uint64_t hash, std::vector<int64_t> tokens);

  // The hash of a block of `tokens` after the blocks whose hash is `parent` (0: the first).
  static uint64_t chain_hash(uint64_t parent, const int64_t* tokens, int64_t n,
                             const std::string& adapter);

  // Stores kv head `head`'s key and value (D floats each, rounded to nearest even into the
  // pool's dtype) at `slot` of `block` in `layer`.
  void store(int64_t layer, int64_t block, int64_t head, int64_t slot, const float* key,
             const float* value);
  // All of `layer`'s keys (or values), [blocks, Hkv, block_size, D] in dtype(): what
  // ops::paged_attention reads.
  const Tensor& key_cache(int64_t layer) const { return keys_[size_t(layer)]; }
  const Tensor& value_cache(int64_t layer) const { return values_[size_t(layer)]; }

 private:
  struct Block {
    int64_t refs = 0;
    bool published = false;
    uint64_t hash = 0;
    std::vector<int64_t> tokens;
    std::list<int64_t>::iterator lru;  // valid while cached (published, refs 0)
  };
  void unpublish(int64_t block);

  int64_t num_blocks_, block_size_, kv_heads_, head_dim_;
  DType dtype_;
  std::vector<Tensor> keys_, values_;  // per layer [block, Hkv, slot, D]
  std::vector<Block> blocks_;
  std::vector<int64_t> free_;
  std::list<int64_t> lru_;  // cached blocks, least recently released first
  std::unordered_map<uint64_t, int64_t> published_;
};

}  // namespace zenith::serve::llm
