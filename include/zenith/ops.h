// The public ops. Each validates its inputs (errors name the op and the shapes), then calls the
// dispatcher with the op's id and typed attributes (src/core/ops.def lists every op); its
// gradient is defined beside it in src/ops/<family>.cpp, written with ops.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "zenith/quant.h"
#include "zenith/tensor.h"

namespace zenith::ops {

// ---- elementwise binary, with broadcasting and type promotion (src/ops/binary.cpp)
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, double b);
Tensor pow(const Tensor& a, double exponent);

// ---- elementwise unary (src/ops/unary.cpp)
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x, bool tanh_approx = false);
Tensor silu(const Tensor& x);
Tensor square(const Tensor& x);
Tensor erf(const Tensor& x);
Tensor cast(const Tensor& x, DType dtype);
// grad * (out > 0): relu's gradient from its output, one fused kernel (the hot path of CNNs).
Tensor relu_backward(const Tensor& grad, const Tensor& out);

// ---- comparisons and selection (src/ops/compare.cpp); comparisons return bool, no gradient
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

// ---- reductions (src/ops/reduce.cpp); empty dims = all dims
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor max(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor max(const Tensor& x);  // over all elements
Tensor min(const Tensor& x);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);  // int64, no gradient
Tensor var(const Tensor& x, const std::vector<int64_t>& dims = {}, bool unbiased = true,
           bool keepdim = false);
// Sums `x` down to `shape` (the inverse of broadcasting), used by gradients.
Tensor sum_to(const Tensor& x, const Shape& shape);

// ---- linear algebra (src/ops/matmul.cpp)
// [.., n, k] x [.., k, m] -> [.., n, m] with broadcast batch dims; 1-d operands as in numpy.
// float32 or float64 operands of one dtype; a bfloat16/float16 operand with a float32 one
// computes in float32 and returns float32 (no float32 copy of the 16-bit matrix is made); two
// 16-bit operands of one dtype compute in float32 and return that dtype.
Tensor matmul(const Tensor& a, const Tensor& b);
// x [.., in] W [out, in] b [out] -> [.., out]; dtypes as for matmul (a 16-bit weight with float32
// x gives float32; the bias may have x's or the weight's dtype).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
// x [.., in] (float32; float64 computes exactly on the dequantized weight) times the transpose
// of a weight held as quantized blocks -> [.., out] float32 (src/ops/quantized.cpp). The weight
// gets no gradient; x gets dy W with W dequantized.
Tensor quantized_linear(const Tensor& x, const QuantizedWeight& weight);

// ---- convolution and pooling, NCHW (src/ops/conv.cpp, src/ops/pool.cpp)
struct Conv2dOptions {
  std::vector<int64_t> stride = {1, 1};
  std::vector<int64_t> padding = {0, 0};  // ignored when padding_mode is "same" or "valid"
  std::string padding_mode = "explicit";  // "explicit", "same", "valid"
  std::vector<int64_t> dilation = {1, 1};
  int64_t groups = 1;
};
// x [N, C, H, W], weight [O, C/groups, KH, KW], bias [O] -> [N, O, OH, OW]
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              const Conv2dOptions& options = {});
Tensor max_pool2d(const Tensor& x, std::vector<int64_t> kernel, std::vector<int64_t> stride = {},
                  std::vector<int64_t> padding = {0, 0});
Tensor avg_pool2d(const Tensor& x, std::vector<int64_t> kernel, std::vector<int64_t> stride = {},
                  std::vector<int64_t> padding = {0, 0}, bool count_include_pad = true);
Tensor adaptive_avg_pool2d(const Tensor& x, std::vector<int64_t> output_size);

// ---- normalisation (src/ops/batch_norm.cpp, src/ops/layer_norm.cpp) and dropout
// (src/ops/dropout.cpp)
// In training mode uses batch statistics and updates running_mean/var in place
// (running = (1 - momentum) * running + momentum * batch, unbiased variance as in PyTorch).
Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor running_mean,
                  Tensor running_var, bool training, double momentum = 0.1, double eps = 1e-5);
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
// weight * (x / sqrt(mean(x^2) + eps)) over the trailing dims; Hugging Face's LlamaRMSNorm for
// bfloat16/float16 x or weight: normalised in float32, cast back to x's dtype, times weight
// (the result in the dtype of weight * x).
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                double eps = 1e-6);
Tensor dropout(const Tensor& x, double p, bool training);

// ---- transformer ops (src/ops/attention.cpp, src/ops/rotary.cpp, src/ops/swiglu.cpp).
// float32 and float64 compute; bfloat16/float16 inputs are computed in float32 and the result
// cast back to their dtype.
struct AttentionOptions {
  // Query i attends key j only when j <= i + (S - T): bottom-right aligned, so one op serves
  // training (T = S) and a KV-cache decode step (T new queries after S - T cached keys).
  bool causal = false;
  Tensor key_padding_mask = {};      // optional bool/integer [B, S]: nonzero = attend, 0 = pad
  Tensor attn_mask = {};             // optional additive float, broadcastable to [B, Hq, T, S]
  std::optional<double> scale = {};  // default 1 / sqrt(D)
};
// softmax(q k^T scale + masks) v, one fused kernel forward and backward (no [T, S] matrix).
// q [B, Hq, T, D], k [B, Hkv, S, D], v [B, Hkv, S, Dv] with Hq % Hkv == 0: query head h reads
// kv head h / (Hq / Hkv) (HF's repeat_kv). Returns [B, Hq, T, Dv]. A query row whose every key
// is masked (causal, padding, or -inf in attn_mask) outputs 0. Gradients for q, k, v (not for
// attn_mask).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options = {});
// Attention of packed tokens over a paged KV cache, for serving (src/ops/paged_attention.cpp).
// q [1, H, N, D]: N tokens of several sequences; key_cache, value_cache [blocks, Hkv,
// block_size, D] (vLLM's "HND": a block's positions of one kv head are one contiguous run) with
// H % Hkv == 0 (head h reads kv head h / (H / Hkv)), in q's dtype or, for a float32 q, bfloat16
// or float16 (widened exactly as read); block_table int32 [S, max_blocks]: position p of
// sequence s is in block block_table[s, p / block_size], slot p % block_size; seq_of_token,
// positions int32 [N]. Token i attends to positions 0 .. positions[i] of sequence
// seq_of_token[i]: softmax(q k^T scale) v, scale default 1 / sqrt(D). Returns [1, H, N, D] in
// q's dtype (float32, or float64 as the reference). A token's result does not depend on the
// call's other tokens. Inference only: a backward through it throws.
Tensor paged_attention(const Tensor& q, const Tensor& key_cache, const Tensor& value_cache,
                       const Tensor& block_table, const Tensor& seq_of_token,
                       const Tensor& positions, std::optional<double> scale = {});
// x cos + rotate_half(x) sin (Hugging Face's half convention: rotate_half(x) = [-x2, x1] over
// the two halves of the last dim). x [B, H, T, D]; cos, sin [B or 1, T, D] (or [T, D]) as
// rope_cos_sin makes them. Gradients for x (and cos/sin when they require grad).
Tensor rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin);
// Hugging Face's rotary inverse frequencies: theta^(-2i/head_dim), i < head_dim / 2, then
// rope_scaling (modeling_rope_utils): "default" (none), "linear" (/ factor) or "llama3".
struct RopeOptions {
  double theta = 10000.0;
  std::string scaling = "default";  // "default" (or "none"), "linear", "llama3"
  double factor = 1.0;
  double low_freq_factor = 1.0;                     // llama3
  double high_freq_factor = 4.0;                    // llama3
  int64_t original_max_position_embeddings = 8192;  // llama3
};
Tensor rope_inv_freq(int64_t head_dim, const RopeOptions& options = {});  // float64 [D / 2]
// cos and sin [B, T, D] of position_ids [B, T] (integers) times inv_freq, cat(freqs, freqs) as
// HF lays them out; angles in float64, results in `dtype`. No gradient.
std::pair<Tensor, Tensor> rope_cos_sin(const Tensor& inv_freq, const Tensor& position_ids,
                                       DType dtype = DType::f32);
// silu(gate) * up (the LLaMA MLP's activation), fused forward and backward; same shapes.
Tensor swiglu(const Tensor& gate, const Tensor& up);

// ---- softmax and losses (src/ops/softmax.cpp, src/ops/loss.cpp)
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
// logits [N, C] (or [N, C, d...]); target int64 class indices [N] or dense probabilities [N, C].
// reduction: "mean", "sum", "none".
Tensor cross_entropy(const Tensor& logits, const Tensor& target,
                     const std::string& reduction = "mean", int64_t ignore_index = -100,
                     double label_smoothing = 0.0);
Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");

// ---- indexing and joining (src/ops/index.cpp)
// [V, D] x int [..] -> [.., D]; a bfloat16/float16 table gives float32 rows.
Tensor embedding(const Tensor& weight, const Tensor& indices);
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim);
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);

// ---- optimizer updates, in place on contiguous tensors of one float dtype, no gradient
// (src/ops/optimizer_update.cpp)
// g = grad + weight_decay param; velocity = momentum velocity + g;
// param -= lr (nesterov ? g + momentum velocity : velocity). Without a velocity: param -= lr g.
void momentum_update(const Tensor& param, const Tensor& grad, const Tensor& velocity, double lr,
                     double momentum, double weight_decay, bool nesterov);
// Adam at 1-based `step` (PyTorch's formulas); decoupled: AdamW's weight decay.
void adam_update(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                 double lr, double beta1, double beta2, double eps, double weight_decay,
                 bool decoupled, int64_t step);

}  // namespace zenith::ops

namespace zenith {

// Operators on tensors and scalars, as in PyTorch.
inline Tensor operator+(const Tensor& a, const Tensor& b) { return ops::add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return ops::sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return ops::mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return ops::div(a, b); }
inline Tensor operator+(const Tensor& a, double b) { return ops::add(a, b); }
inline Tensor operator-(const Tensor& a, double b) { return ops::sub(a, b); }
inline Tensor operator*(const Tensor& a, double b) { return ops::mul(a, b); }
inline Tensor operator/(const Tensor& a, double b) { return ops::div(a, b); }
inline Tensor operator+(double a, const Tensor& b) { return ops::add(b, a); }
inline Tensor operator*(double a, const Tensor& b) { return ops::mul(b, a); }
inline Tensor operator-(double a, const Tensor& b) { return ops::add(ops::neg(b), a); }

}  // namespace zenith
