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

// The fused output layer's tile: kRowBlock rows x kVocabChunk classes. Measured on stories15M's
// head (D 288, V 32000, one AVX-512 core, CPU time): the logits' transpose W_chunk x^T runs
// faster than x W_chunk^T (dnnl_sgemm 182 vs 143 GFLOP/s at 128 rows); 512 classes keep a tile
// and its exps in L2; fewer rows a block make W's chunks too short a GEMM (2048 rows, before the
// 8 x 8 transposes: 293 ms at 256 x 512, 306 at 128 x 512, 391 at 64 x 512, 308 at 256 x 1024;
// x W_chunk^T tiles 322 ms at 128 x 512). Tried and dropped (2048 rows, best of 4, same loaded
// host, 267-310 ms for this kernel): dlogits as the transposed view of a [V, M] buffer, the
// tiles' own layout (no transposes; the GEMM writing into it or a copy, vocabulary chunks outer,
// one streaming scaling pass at the end; dW then reads it plainly and dx as a transposed operand,
// both as fast as before) 268-324 ms, and 352 ms with a power-of-two row stride (cache sets);
// non-temporal stores for the transposes: no change. The time left over the GEMM (~70-90 ms) is
// spread over the exps, the max, the 262 MB written and the scaling pass.
// Later (packed oneDNN tile GEMM and 512-bit exps in, same kernel, 1 thread, medians of 5-7 on a
// shared host): dx = dlogits W made here as well, flash-attention style (dx_acc += E W_chunk per
// tile while W_chunk and the exps are in cache, rescaled as the row's max grows; W read once):
// 30.95 ms against 30.96 for this kernel + the separate matmul at 128 rows, 496.5 vs 496.9 at
// 2048 (both GEMMs already run at the sgemm peak; dW still needs dlogits): not built. AVX-512
// 16 x 16 transposes (whole-line stores): no change (15.4-15.8 vs 15.2-15.7 ms at 128 rows; the
// transposes are store-bound); tiles of 256 x 1024, 512 x 256 or 512 x 512: none faster.
constexpr int64_t kRowBlock = 256, kVocabChunk = 512;

// The float32 tile GEMM lt[n, mb] = W_chunk [n, d] x_block^T [d, mb] as oneDNN matmuls whose
// weights, x_block^T, are reordered once per row block into the format the primitive packs them
// in, then serve every chunk (measured at M 512, N 128, K 288: 203 GFLOP/s against dnnl_sgemm's
// 186-190). One primitive for full chunks of vc classes, one for a shorter last chunk; where
// oneDNN makes none, packs nothing (below AVX-512) or not for the packed format, dnnl_sgemm.
// concurrent: run by several threads of a parallel region at once (one per vocabulary chunk),
// each with its own memory objects and scratchpad (with oneDNN's shared library scratchpad the
// threads' tiles came out wrong: the 3-thread case of the fused-ops test caught it).
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
// as exp(l - the row's max
// over the chunk) into lt [n, mb], the logits' transpose, whose rows run over the block's rows
// (the max and exp vectorise across them), their statistics into st; then, where out is not
// null, written to out (row stride v) in 8 x 8 blocks (8 cache lines in flight, not mb).
// mb <= kRowBlock.
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
