// The tiny LLaMA of the tensor-parallel tests (tensor_parallel_test.cpp,
// tensor_parallel_generate_test.cpp): 2 blocks, hidden 32, grouped-query attention (two query
// heads per key/value head), small enough for degree 2 on forked ranks.
#pragma once

#include <cstdint>

#include "zenith/llama_config.h"

namespace zenith::test {

// `tied`: the output layer shares the embedding; `max_positions`: its context. initializer_range
// 0.2: logits far apart (no near-ties in a greedy argmax) and gradients that are not tiny.
inline models::LlamaConfig tiny_llama_config(bool tied, int64_t max_positions = 64) {
  models::LlamaConfig c;
  c.vocab_size = 64;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.max_position_embeddings = max_positions;
  c.tie_word_embeddings = tied;
  c.extra["initializer_range"] = "0.2";
  return c;
}

}  // namespace zenith::test
