// The paged KV pool: blocks, reference counts, the free list and the prefix cache.
#include "serve/llm/kv_pool.h"

#include <algorithm>

#include "zenith/error.h"

namespace zenith::serve::llm {

int64_t KvPool::bytes_per_block(const models::LlamaConfig& c, int64_t block_size, DType dtype) {
  return 2 * c.num_hidden_layers * block_size * c.num_key_value_heads * c.head_dim *
         int64_t(itemsize(dtype));
}

KvPool::KvPool(const models::LlamaConfig& c, int64_t bytes, int64_t block_size, DType dtype)
    : num_blocks_(0),
      block_size_(block_size),
      kv_heads_(c.num_key_value_heads),
      head_dim_(c.head_dim),
      dtype_(dtype) {
  ZENITH_CHECK(block_size > 0, "[llm engine] block_size must be positive, got ", block_size);
  ZENITH_CHECK(dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16,
               "[llm engine] the KV cache dtype must be float32, bfloat16 or float16, got ",
               dtype_name(dtype));
  num_blocks_ = bytes / bytes_per_block(c, block_size, dtype);
  ZENITH_CHECK(num_blocks_ >= 2, "[llm engine] a KV pool of ", bytes, " bytes holds ", num_blocks_,
               " blocks of ", block_size, " positions (", bytes_per_block(c, block_size, dtype),
               " bytes each in ", dtype_name(dtype), "); give it room for at least 2");
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    keys_.push_back(Tensor::zeros({num_blocks_, kv_heads_, block_size_, head_dim_}, dtype));
    values_.push_back(Tensor::zeros({num_blocks_, kv_heads_, block_size_, head_dim_}, dtype));
  }
  blocks_.resize(size_t(num_blocks_));
  // Popped from the back: block 0 first.
  for (int64_t b = num_blocks_ - 1; b >= 0; --b) free_.push_back(b);
}

void KvPool::store(int64_t layer, int64_t block, int64_t head, int64_t slot, const float* key,
                   const float* value) {
  const int64_t at = ((block * kv_heads_ + head) * block_size_ + slot) * head_dim_;
  const Tensor &k = keys_[size_t(layer)], &v = values_[size_t(layer)];
  switch (dtype_) {
    case DType::bf16: {
      BFloat16 *kd = k.data<BFloat16>() + at, *vd = v.data<BFloat16>() + at;
      for (int64_t e = 0; e < head_dim_; ++e) {
        kd[e].bits = float_to_bf16(key[e]);
        vd[e].bits = float_to_bf16(value[e]);
      }
      return;
    }
    case DType::f16: {
      Half *kd = k.data<Half>() + at, *vd = v.data<Half>() + at;
      for (int64_t e = 0; e < head_dim_; ++e) {
        kd[e].bits = float_to_half(key[e]);
        vd[e].bits = float_to_half(value[e]);
      }
      return;
    }
    default:
      std::copy_n(key, head_dim_, k.data<float>() + at);
      std::copy_n(value, head_dim_, v.data<float>() + at);
  }
}

int64_t KvPool::allocate() {
  int64_t b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else if (!lru_.empty()) {
    b = lru_.front();
    lru_.pop_front();
    unpublish(b);
  } else {
    return -1;
  }
  blocks_[size_t(b)].refs = 1;
  return b;
}

void KvPool::release(int64_t b) {
  Block& block = blocks_[size_t(b)];
  ZENITH_CHECK(block.refs > 0, "[llm engine] KV block ", b, " released twice");
  if (--block.refs > 0) return;
  if (block.published) {
    block.lru = lru_.insert(lru_.end(), b);
  } else {
    free_.push_back(b);
  }
}

std::optional<int64_t> KvPool::lookup(uint64_t hash, const std::vector<int64_t>& tokens) {
  auto it = published_.find(hash);
  if (it == published_.end()) return std::nullopt;
  Block& block = blocks_[size_t(it->second)];
  if (block.tokens != tokens) return std::nullopt;  // a hash collision
  if (block.refs++ == 0) lru_.erase(block.lru);
  return it->second;
}

void KvPool::publish(int64_t b, uint64_t hash, std::vector<int64_t> tokens) {
  Block& block = blocks_[size_t(b)];
  if (block.published || published_.count(hash)) return;  // already there (another copy)
  block.published = true;
  block.hash = hash;
  block.tokens = std::move(tokens);
  published_.emplace(hash, b);
}

void KvPool::unpublish(int64_t b) {
  Block& block = blocks_[size_t(b)];
  if (!block.published) return;
  published_.erase(block.hash);
  block.published = false;
  block.tokens.clear();
}

uint64_t KvPool::chain_hash(uint64_t parent, const int64_t* tokens, int64_t n,
                            const std::string& adapter) {
  // FNV-1a over the parent, the adapter's name and the ids, then a splitmix64 finish.
  uint64_t h = 1469598103934665603ULL;
  auto mix = [&](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ULL;
    }
  };
  mix(parent);
  for (char c : adapter) mix(uint64_t(uint8_t(c)));
  mix(uint64_t(n));
  for (int64_t i = 0; i < n; ++i) mix(uint64_t(tokens[i]));
  h ^= h >> 30;
  h *= 0xBF58476D1CE4E5B9ULL;
  h ^= h >> 27;
  h *= 0x94D049BB133111EBULL;
  return (h ^ (h >> 31)) | 1;  // never 0: 0 is the chain's start
}

}  // namespace zenith::serve::llm
