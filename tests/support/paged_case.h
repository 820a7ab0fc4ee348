// Random paged-attention calls (ops::paged_attention, src/backend/cpu/paged_attention*) and their
// float64 reference: sequences of given lengths whose blocks are drawn from a shuffled pool (the
// last block partial), each computing a chunk of its last positions this call (a chunk of 1 is a
// decode step, the whole length a prefill, anything between a chunked prefill).
#pragma once

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "zenith/zenith.h"

namespace zenith::testing {

struct PagedCase {
  Tensor q, k, v;               // float64: q [1, H, N, D]; k, v [blocks, Hkv, P, D]
  Tensor table, seq, pos;       // int32 [S, width] (unused entries -1), [N], [N]
  std::vector<int64_t> chunks;  // tokens per sequence, packed in sequence order
};

// lengths[s]: sequence s's positions after this call; chunks[s]: how many of its last positions
// this call computes.
inline PagedCase paged_case(int64_t heads, int64_t kv_heads, int64_t d, int64_t block_size,
                            const std::vector<int64_t>& lengths, const std::vector<int64_t>& chunks,
                            uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int64_t> used;
  int64_t blocks = 3, width = 1;  // a few blocks nobody uses
  for (int64_t len : lengths) {
    const int64_t b = (len + block_size - 1) / block_size;
    used.push_back(b);
    blocks += b;
    width = std::max(width, b + 1);
  }
  std::vector<int64_t> ids(static_cast<size_t>(blocks));
  for (int64_t i = 0; i < blocks; ++i) ids[size_t(i)] = i;
  std::shuffle(ids.begin(), ids.end(), rng);
  std::vector<int64_t> table(size_t(int64_t(lengths.size()) * width), -1), seq, pos;
  size_t next = 0;
  for (size_t s = 0; s < lengths.size(); ++s) {
    for (int64_t b = 0; b < used[s]; ++b) table[s * size_t(width) + size_t(b)] = ids[next++];
    for (int64_t p = lengths[s] - chunks[s]; p < lengths[s]; ++p) {
      seq.push_back(int64_t(s));
      pos.push_back(p);
    }
  }
  const auto n = int64_t(seq.size());
  const auto i32 = [](const std::vector<int64_t>& v, const Shape& shape) {
    return Tensor::from_vector(v, shape).to(DType::i32);
  };
  PagedCase c;
  c.q = Tensor::uniform({1, heads, n, d}, -1, 1, DType::f64);
  c.k = Tensor::uniform({blocks, kv_heads, block_size, d}, -1, 1, DType::f64);
  c.v = Tensor::uniform({blocks, kv_heads, block_size, d}, -1, 1, DType::f64);
  c.table = i32(table, {int64_t(lengths.size()), width});
  c.seq = i32(seq, {n});
  c.pos = i32(pos, {n});
  c.chunks = chunks;
  return c;
}

// softmax(q k^T / sqrt(D)) v per token over its sequence's positions 0 .. its own, in float64
// with the keys gathered through the table one position at a time (c.k, c.v in any dtype: a
// bfloat16 cache's reference is its rounded values, widened exactly).
inline Tensor paged_reference(const PagedCase& c) {
  const Tensor q = c.q.to(DType::f64).contiguous(), k = c.k.to(DType::f64).contiguous(),
               v = c.v.to(DType::f64).contiguous();
  const Tensor table = c.table.to(DType::i64), seq = c.seq.to(DType::i64),
               pos = c.pos.to(DType::i64);
  const int64_t heads = q.size(1), n = q.size(2), d = q.size(3), bs = k.size(2),
                kv_heads = k.size(1), width = table.size(1);
  Tensor out = Tensor::zeros(q.shape(), DType::f64);
  const double *pq = q.data<double>(), *pk = k.data<double>(), *pv = v.data<double>();
  const int64_t *pt = table.data<int64_t>(), *ps = seq.data<int64_t>(), *pp = pos.data<int64_t>();
  double* po = out.data<double>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t kvh = h / (heads / kv_heads), keys = pp[i] + 1;
      std::vector<double> s(static_cast<size_t>(keys));
      double top = -INFINITY, sum = 0;
      auto at = [&](const double* cache, int64_t j) {
        return cache + ((pt[ps[i] * width + j / bs] * kv_heads + kvh) * bs + j % bs) * d;
      };
      for (int64_t j = 0; j < keys; ++j) {
        double dot = 0;
        for (int64_t e = 0; e < d; ++e) dot += pq[(h * n + i) * d + e] * at(pk, j)[e];
        s[size_t(j)] = dot / std::sqrt(double(d));
        top = std::max(top, s[size_t(j)]);
      }
      for (double& x : s) sum += (x = std::exp(x - top));
      for (int64_t j = 0; j < keys; ++j)
        for (int64_t e = 0; e < d; ++e)
          po[(h * n + i) * d + e] += s[size_t(j)] / sum * at(pv, j)[e];
    }
  return out;
}

}  // namespace zenith::testing
