// One engine step's view of the KV pool, as models::Llama sees it (an AttentionStore): the packed
// rows of several sequences, where each sequence's keys and values go in its blocks, attention
// for each row over its own sequence's positions, and the LoRA deltas of rows whose request
// names an adapter (multi-LoRA: requests with different adapters share the step).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "serve/llm/kv_pool.h"
#include "zenith/llama.h"

namespace zenith::serve::llm {

// A PEFT adapter as the engine applies it: y += scaling * (x A^T) B^T on its requests' rows.
struct AdapterWeights {
  std::string name;
  std::string cache_key;  // name and load count: a reloaded adapter never meets old KV blocks
  double scaling = 1;
  std::map<std::string, std::pair<Tensor, Tensor>> modules;  // path -> A [r, in], B [out, r]
};

// One sequence's rows in the step.
struct StepSequence {
  int64_t row = 0;                               // its first packed row
  int64_t count = 0;                             // its rows (tokens computed this step)
  int64_t position = 0;                          // the position of its first row in the sequence
  const std::vector<int64_t>* blocks = nullptr;  // its block table (covers position + count)
  const AdapterWeights* adapter = nullptr;       // null: the base model
};

class StepStore : public models::AttentionStore {
 public:
  StepStore(KvPool& pool, std::vector<StepSequence> sequences, int64_t heads);
  // Writes k, v to each sequence's blocks, then ops::paged_attention over the pool: each row
  // attends to its sequence's positions 0 .. its own, reduced in one fixed order (so a row's
  // output does not depend on the step's other rows).
  Tensor attend(int64_t layer, const Tensor& q, const Tensor& k, const Tensor& v) override;
  Tensor after_linear(const std::string& path, const Tensor& x, const Tensor& y) override;
  // The packed rows that get logits (LlamaInput::logit_rows): lm_head sees only these.
  void set_logit_rows(std::vector<int64_t> rows) { logit_rows_ = std::move(rows); }

 private:
  KvPool& pool_;
  std::vector<StepSequence> sequences_;
  int64_t heads_;
  int64_t total_rows_ = 0;
  // paged_attention's index operands, the same for every layer of the step: int32 block table
  // [S, max blocks], each row's sequence and position [N].
  Tensor block_table_, seq_of_row_, position_of_row_;
  // Rows per adapter (those with modules), for after_linear.
  std::vector<std::pair<const AdapterWeights*, std::vector<int64_t>>> adapter_rows_;
  std::vector<int64_t> logit_rows_;
};

}  // namespace zenith::serve::llm
