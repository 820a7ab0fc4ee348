// The tiles of the CPU linear_cross_entropy (linear_cross_entropy.cpp): each a GEMM of the
// output layer's weight chunk with a block of rows, its logits turned into exps and per-chunk
// statistics while in cache. M rows, D features, V classes.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "backend/cpu/elementwise_functors.h"
#include "backend/cpu/onednn.h"

namespace zenith::cpu {

// The fused output layer's tile: kRowBlock rows x kVocabChunk classes (bench/lm_head; figures in
// docs/performance.md). The GEMM makes the logits' transpose W_chunk x^T, faster than x W_chunk^T
// at stories15M's head; 512 classes keep a tile and its exps in L2; fewer rows a block make W's
// chunks too short a GEMM. Tried and no faster: dlogits in the tiles' own layout (no
// transposes), a power-of-two row stride, non-temporal or AVX-512 16 x 16 stores for the
// (store-bound) transposes, other tile sizes, and dx = dlogits W made here flash-attention style
// (both GEMMs already run at the sgemm peak, and dW still needs dlogits).
constexpr int64_t kRowBlock = 256, kVocabChunk = 512;

// The float32 tile GEMM lt[n, mb] = W_chunk [n, d] x_block^T [d, mb] as oneDNN matmuls whose
// weights, x_block^T, are reordered once per row block into the format the primitive packs them
// in, then serve every chunk (faster than dnnl_sgemm at these shapes). One primitive for full
// chunks of vc classes, one for a shorter last chunk; where oneDNN makes none, packs nothing (below
// AVX-512) or not for the packed format, dnnl_sgemm. concurrent: run by several threads of a
// parallel region at once (one per vocabulary chunk), each with its own memory objects and
// scratchpad (with oneDNN's shared library scratchpad the threads' tiles came out wrong: the
// 3-thread case of the fused-ops test caught it).
class TileGemm {
 public:
  TileGemm(int64_t mb, int64_t d, int64_t vc, int64_t last, bool concurrent);
  int64_t rows() const { return mb_; }
  // x_block: [mb, d] rows of x (row stride d).
  void set_rows(const float* x_block);
  // lt [n, mb] for W_chunk [n, d] (row stride d).
  void run(const float* w_chunk, int64_t n, float* lt);

 private:
  using memory = dnnl::memory;
  using dt = memory::data_type;
  struct Entry {
    bool made = false, has_last = false;
    size_t scratch = 0;  // bytes of the concurrent primitives' scratchpad
    memory::desc packed;
    onednn::Primitive pack, full, last;
  };
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  // x_block^T as stored: element (k, j) at x_block[j d + k].
  memory::desc plain_weights() const;
  onednn::Primitive make(int64_t n, const memory::desc& weights, memory::desc* chosen,
                         Entry* e) const;
  int64_t mb_, d_, vc_;
  bool concurrent_;
  const float* x_ = nullptr;
  std::shared_ptr<Entry> e_;
  std::unique_ptr<float, Free> packed_;
};

// One row block's statistics per (row, vocabulary chunk): [rows, chunks].
template <typename T>
struct ChunkStats {
  std::vector<T> max, sum, below;  // the chunk's max, sum exp(l - max), sum (max - l)
  std::vector<T> target;           // [rows]: the target's logit
  ChunkStats(int64_t rows, int64_t chunks)
      : max(size_t(rows * chunks)),
        sum(size_t(rows * chunks)),
        below(size_t(rows * chunks)),
        target(size_t(rows)) {}
};

// The logits of rows [r0, r0 + mb) and classes [c0, c0 + n) (chunk c, whose weight rows wc are)
// as exp(l - the row's max over the chunk) into lt [n, mb], the logits' transpose, whose rows run
// over the block's rows (the max and exp vectorise across them), their statistics into st; then,
// where out is not null, written to out (row stride v) in 8 x 8 blocks (8 cache lines in flight,
// not mb). mb <= kRowBlock.
template <typename T>
void exp_tile(const T* x, const T* wc, const int64_t* t, int64_t r0, int64_t mb, int64_t d,
              int64_t c, int64_t c0, int64_t n, int64_t chunks, T* lt, ChunkStats<T>& st, T* out,
              int64_t v, TileGemm* tile_gemm);

// One row's loss from its chunks' statistics, and the factor f_c = g exp(max_c - max - log_sum)
// that turns chunk c's exps exp(l - max_c) into g softmax.
template <typename T>
T row_loss_and_factors(const ChunkStats<T>& st, int64_t i, int64_t chunks, int64_t vc, int64_t v,
                       T on, T off, T gi, T* f, int64_t f_stride) {
  const T* cm = st.max.data() + i * chunks;
  const T* cs = st.sum.data() + i * chunks;
  const T* cb = st.below.data() + i * chunks;
  const T mx = *std::max_element(cm, cm + chunks);
  T s = 0, below = 0;
  for (int64_t c = 0; c < chunks; ++c) {
    s += cs[c] * exp_of(cm[c] - mx);
    below += T(std::min(vc, v - c * vc)) * (mx - cm[c]) + cb[c];
  }
  const T log_sum = std::log(s);
  for (int64_t c = 0; c < chunks; ++c) f[c * f_stride] = gi * exp_of((cm[c] - mx) - log_sum);
  return log_sum + on * (mx - st.target[size_t(i)]) + off * below;
}

}  // namespace zenith::cpu
