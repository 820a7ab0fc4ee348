// Paged attention over block tables (v1: a direct loop per row and head, reading keys and values
// in place from the blocks; rows split over threads when a step has enough of them) and per-row
// LoRA deltas.
#include "serve/llm/step_store.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <thread>

#include "zenith/autograd.h"
#include "zenith/context.h"
#include "zenith/error.h"
#include "zenith/ops.h"

namespace zenith::serve::llm {
namespace {

// Multiply-adds of attention per extra thread: below it a step's attention (a decode step's,
// say) stays on the engine thread, where starting a thread would cost more than it saves.
constexpr int64_t kParallelWork = int64_t(1) << 20;

// q . k over d values: eight lanes in steps of 8, a fixed lane tree, the tail in order.
float dot(const float* a, const float* b, int64_t d) {
  __m256 acc = _mm256_setzero_ps();
  int64_t e = 0;
  for (; e + 8 <= d; e += 8)
    acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + e), _mm256_loadu_ps(b + e), acc);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  float sum = _mm_cvtss_f32(s);
  for (; e < d; ++e) sum = std::fma(a[e], b[e], sum);
  return sum;
}

}  // namespace

StepStore::StepStore(KvPool& pool, std::vector<StepSequence> sequences, int64_t heads)
    : pool_(pool), sequences_(std::move(sequences)), heads_(heads) {
  for (const StepSequence& s : sequences_) {
    total_rows_ += s.count;
    if (!s.adapter) continue;
    auto it = std::find_if(adapter_rows_.begin(), adapter_rows_.end(),
                           [&](const auto& p) { return p.first == s.adapter; });
    if (it == adapter_rows_.end()) it = adapter_rows_.insert(adapter_rows_.end(), {s.adapter, {}});
    for (int64_t r = 0; r < s.count; ++r) it->second.push_back(s.row + r);
  }
}

Tensor StepStore::attend(int64_t layer, const Tensor& q_in, const Tensor& k_in,
                         const Tensor& v_in) {
  const Tensor q = q_in.contiguous(), k = k_in.contiguous(), v = v_in.contiguous();
  const int64_t n = q.size(2), d = q.size(3), kv_heads = k.size(1);
  const int64_t group = heads_ / kv_heads, bs = pool_.block_size();
  const float* pk = k.data<float>();
  const float* pv = v.data<float>();
  // Store this step's keys and values: k [1, Hkv, N, D] -> block slot [Hkv, D].
  for (const StepSequence& s : sequences_)
    for (int64_t r = 0; r < s.count; ++r) {
      const int64_t pos = s.position + r, row = s.row + r;
      const int64_t block = (*s.blocks)[size_t(pos / bs)], slot = pos % bs;
      float* kd = pool_.key(layer, block, slot);
      float* vd = pool_.value(layer, block, slot);
      for (int64_t h = 0; h < kv_heads; ++h) {
        std::copy_n(pk + (h * n + row) * d, d, kd + h * d);
        std::copy_n(pv + (h * n + row) * d, d, vd + h * d);
      }
    }
  Tensor out = Tensor::empty({1, heads_, n, d});
  float* po = out.data<float>();
  const float* pq = q.data<float>();
  const float scale = 1.0f / std::sqrt(float(d));
  struct Item {
    const StepSequence* s;
    int64_t r;
  };
  std::vector<Item> items;
  int64_t work = 0;  // multiply-adds
  for (const StepSequence& s : sequences_)
    for (int64_t r = 0; r < s.count; ++r) {
      items.push_back({&s, r});
      work += (s.position + r + 1) * heads_ * d * 2;
    }
  auto attend_rows = [&](size_t begin, size_t end) {
    std::vector<float> scores;
    for (size_t i = begin; i < end; ++i) {
      const StepSequence& s = *items[i].s;
      const int64_t pos = s.position + items[i].r, row = s.row + items[i].r, keys = pos + 1;
      scores.resize(size_t(keys));
      for (int64_t h = 0; h < heads_; ++h) {
        const float* qr = pq + (h * n + row) * d;
        const int64_t kvh = h / group;
        float top = -INFINITY;
        for (int64_t j = 0; j < keys; ++j) {
          const int64_t block = (*s.blocks)[size_t(j / bs)];
          scores[size_t(j)] = dot(qr, pool_.key(layer, block, j % bs) + kvh * d, d) * scale;
          top = std::max(top, scores[size_t(j)]);
        }
        float* o = po + (h * n + row) * d;
        std::fill_n(o, d, 0.f);
        float sum = 0;
        for (int64_t j = 0; j < keys; ++j) {
          const float p = std::exp(scores[size_t(j)] - top);
          sum += p;
          const float* vr = pool_.value(layer, (*s.blocks)[size_t(j / bs)], j % bs) + kvh * d;
          for (int64_t e = 0; e < d; ++e) o[e] = std::fma(p, vr[e], o[e]);
        }
        const float inv = 1.0f / sum;
        for (int64_t e = 0; e < d; ++e) o[e] *= inv;
      }
    }
  };
  // Rows split over threads by equal work; each row is computed whole by one thread, so the
  // split never changes a result.
  const int64_t threads = std::min<int64_t>(
      {int64_t(context::get_num_threads()), work / kParallelWork + 1, int64_t(items.size())});
  if (threads <= 1) {
    attend_rows(0, items.size());
    return out;
  }
  std::vector<size_t> cuts = {0};
  int64_t acc = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    acc += (items[i].s->position + items[i].r + 1) * heads_ * d * 2;
    if (acc * threads >= work * int64_t(cuts.size()) && cuts.size() < size_t(threads))
      cuts.push_back(i + 1);
  }
  cuts.push_back(items.size());
  std::vector<std::thread> helpers;
  for (size_t t = 1; t + 1 < cuts.size(); ++t)
    helpers.emplace_back(attend_rows, cuts[t], cuts[t + 1]);
  attend_rows(cuts[0], cuts[1]);
  for (std::thread& t : helpers) t.join();
  return out;
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
