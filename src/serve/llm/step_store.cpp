// One engine step over the paged KV pool: this step's keys and values written into their
// blocks, attention by ops::paged_attention over the pool's caches, and per-row LoRA deltas.
#include "serve/llm/step_store.h"

#include <algorithm>

#include "zenith/autograd.h"
#include "zenith/error.h"
#include "zenith/ops.h"

namespace zenith::serve::llm {

StepStore::StepStore(KvPool& pool, std::vector<StepSequence> sequences, int64_t heads)
    : pool_(pool), sequences_(std::move(sequences)), heads_(heads) {
  int64_t width = 1;
  for (const StepSequence& s : sequences_) {
    total_rows_ += s.count;
    width = std::max(width, int64_t(s.blocks->size()));
  }
  const auto count = int64_t(sequences_.size());
  block_table_ = Tensor::full({count, width}, -1, DType::i32);
  seq_of_row_ = Tensor::empty({total_rows_}, DType::i32);
  position_of_row_ = Tensor::empty({total_rows_}, DType::i32);
  int32_t* table = block_table_.data<int32_t>();
  int32_t* seq = seq_of_row_.data<int32_t>();
  int32_t* pos = position_of_row_.data<int32_t>();
  for (int64_t i = 0; i < count; ++i) {
    const StepSequence& s = sequences_[size_t(i)];
    std::transform(s.blocks->begin(), s.blocks->end(), table + i * width,
                   [](int64_t b) { return int32_t(b); });
    for (int64_t r = s.row; r < s.row + s.count; ++r) {
      seq[r] = int32_t(i);
      pos[r] = int32_t(s.position + r - s.row);
    }
  }
  for (const StepSequence& s : sequences_) {
    if (!s.adapter) continue;
    auto it = std::find_if(adapter_rows_.begin(), adapter_rows_.end(),
                           [&](const auto& p) { return p.first == s.adapter; });
    if (it == adapter_rows_.end()) it = adapter_rows_.insert(adapter_rows_.end(), {s.adapter, {}});
    for (int64_t r = 0; r < s.count; ++r) it->second.push_back(s.row + r);
  }
}

Tensor StepStore::attend(int64_t layer, const Tensor& q, const Tensor& k_in, const Tensor& v_in) {
  const Tensor k = k_in.contiguous(), v = v_in.contiguous();
  const int64_t n = k.size(2), d = k.size(3), kv_heads = k.size(1), bs = pool_.block_size();
  ZENITH_CHECK(q.size(1) == heads_ && n == total_rows_, "[llm engine] attention got q ",
               shape_str(q.shape()), " for a step of ", total_rows_, " rows and ", heads_,
               " heads");
  const float* pk = k.data<float>();
  const float* pv = v.data<float>();
  // Store this step's keys and values: k [1, Hkv, N, D] -> each kv head's slot of the block.
  for (const StepSequence& s : sequences_)
    for (int64_t r = 0; r < s.count; ++r) {
      const int64_t p = s.position + r, row = s.row + r;
      const int64_t block = (*s.blocks)[size_t(p / bs)], slot = p % bs;
      for (int64_t h = 0; h < kv_heads; ++h)
        pool_.store(layer, block, h, slot, pk + (h * n + row) * d, pv + (h * n + row) * d);
    }
  return ops::paged_attention(q, pool_.key_cache(layer), pool_.value_cache(layer), block_table_,
                              seq_of_row_, position_of_row_);
}

Tensor StepStore::after_linear(const std::string& path, const Tensor& x, const Tensor& y) {
  if (adapter_rows_.empty()) return y;
  Tensor out = y;
  bool copied = false;
  for (const auto& [adapter, packed_rows] : adapter_rows_) {
    auto it = adapter->modules.find(path);
    if (it == adapter->modules.end()) continue;
    if (!copied) {
      out = y.contiguous().clone();
      copied = true;
    }
    const auto& [a, b] = it->second;
    std::vector<int64_t> rows = packed_rows;
    if (x.size(1) != total_rows_) {  // lm_head: only the logit rows, in their order
      rows.clear();
      for (size_t i = 0; i < logit_rows_.size(); ++i)
        if (std::binary_search(packed_rows.begin(), packed_rows.end(), logit_rows_[i]))
          rows.push_back(int64_t(i));
      if (rows.empty()) continue;
    }
    const Tensor index = Tensor::from_vector(rows, {int64_t(rows.size())});
    const Tensor xr = ops::index_select(x, 1, index).reshape({int64_t(rows.size()), x.size(2)});
    const Tensor delta = ops::linear(ops::linear(xr, a), b).contiguous();  // [R, out]
    const int64_t width = y.size(2);
    const float* pd = delta.data<float>();
    float* po = out.data<float>();
    const auto scaling = float(adapter->scaling);
    for (size_t i = 0; i < rows.size(); ++i)
      for (int64_t c = 0; c < width; ++c)
        po[rows[i] * width + c] += scaling * pd[int64_t(i) * width + c];
  }
  return out;
}

}  // namespace zenith::serve::llm
