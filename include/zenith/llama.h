// The LLaMA family as a Cell tree with Hugging Face's parameter names (LLaMA 1/2/3.x, TinyLlama,
// SmolLM, Mistral without a sliding window, Qwen2), so HF model directories load without
// renaming; a KV cache for decoding; PEFT LoRA adapters applied unmerged or merged; sampling and
// greedy generation; perplexity.
//
//   auto model = models::Llama::from_pretrained("TinyLlama-1.1B");   // bf16 stays bf16
//   Tensor logits = model->forward(ids);                             // [B, T, V] float32
//   Tensor loss = models::causal_lm_loss(logits, labels);            // HF's shift, -100 ignored
//   models::load_lora(*model, "my-adapter");                         // unmerged
//   auto out = models::generate(*model, prompt, {.max_new_tokens = 32, .temperature = 0});
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "zenith/hf.h"
#include "zenith/llama_config.h"
#include "zenith/lora.h"
#include "zenith/nn.h"
#include "zenith/quant.h"

namespace zenith::models {

// Keys and values of the positions seen so far, per layer [B, Hkv, capacity, D] in float32
// (after rotary embedding, before grouped-query sharing). The buffers are allocated once and
// doubled when a forward pass needs more room.
class KVCache {
 public:
  KVCache(const LlamaConfig& config, int64_t batch, int64_t capacity = 0);
  int64_t length() const { return length_; }  // positions stored
  int64_t batch() const { return batch_; }
  int64_t capacity() const { return capacity_; }
  int64_t num_layers() const { return int64_t(keys_.size()); }
  void reset() { length_ = 0; }

  // Stores k, v [B, Hkv, T, D] at positions length() .. length() + T - 1 of `layer` and returns
  // the layer's keys and values for positions 0 .. length() + T - 1 (views of the buffers).
  std::pair<Tensor, Tensor> append(int64_t layer, const Tensor& k, const Tensor& v);
  // Moves length() on by `t` once every layer has appended (Llama::forward does this).
  void advance(int64_t t);

 private:
  void reserve(int64_t capacity);
  int64_t batch_, kv_heads_, head_dim_;
  int64_t length_ = 0, capacity_ = 0;
  std::vector<Tensor> keys_, values_;
};

// Where attention's keys and values live during serving: the LLM engine's paged pool implements
// it, so the model knows nothing of pools, blocks or requests. With a store, a forward pass takes
// the N tokens of several sequences packed as input_ids [1, N], each with its position in its
// own sequence (position_ids [1, N]).
class AttentionStore {
 public:
  virtual ~AttentionStore() = default;
  // q [1, H, N, D], k, v [1, Hkv, N, D]: the packed tokens of this step after rotary. Stores k
  // and v and returns the attention output [1, H, N, D]: each token attends to the positions of
  // its own sequence up to and including its own.
  virtual Tensor attend(int64_t layer, const Tensor& q, const Tensor& k, const Tensor& v) = 0;
  // Called after each linear layer (its module path as Llama::linear_layers() names it, input
  // x [1, N, in], output y [1, N, out]); returns y plus any per-row deltas (multi-LoRA).
  virtual Tensor after_linear(const std::string& path, const Tensor& x, const Tensor& y) {
    (void)path, (void)x;
    return y;
  }
};

struct LlamaInput {
  Tensor input_ids;       // integer [B, T], each in [0, vocab_size)
  Tensor attention_mask;  // optional integer/bool [B, past + T]: 1 token, 0 padding
  Tensor position_ids;    // optional integer [B, T]; default past + arange(T) (HF's forward)
  KVCache* cache = nullptr;
  bool last_position_only = false;  // logits of the last position only: [B, 1, V]
  // Packed serving (B = 1, position_ids required, no cache or mask): attention goes through it.
  AttentionStore* store = nullptr;
  Tensor logit_rows;  // optional integer [R]: only these positions get logits, [B, R, V]
};

// What a decoder layer under selective activation checkpointing keeps from its forward: the
// outputs of its costliest GEMMs per byte kept (bench/finetune chose it; see docs/llm.md).
inline constexpr const char* kSelectiveCheckpointing = "gate_proj,up_proj,down_proj";

class Llama : public nn::Cell {
 public:
  // Random weights as transformers initialises them (normal(0, initializer_range) for linear
  // and embedding weights, zero biases, norms at 1), stored in `dtype`.
  explicit Llama(LlamaConfig config, DType dtype = DType::f32);
  // Adopts `weights` under HF's names, each in its own dtype (no copy). They are checked
  // against the config first (check_llama_state; `source` names them in errors). A tied
  // model's lm_head.weight and old rotary inv_freq buffers are dropped.
  Llama(LlamaConfig config, std::map<std::string, Tensor> weights, const std::string& source);

  // An HF model directory: config.json and model.safetensors or shards + index. Weights keep
  // their file dtype (F32, BF16, F16; compute is float32) unless `dtype` is given.
  static std::shared_ptr<Llama> from_pretrained(const std::string& dir,
                                                std::optional<DType> dtype = std::nullopt);
  // config.json (torch_dtype = the weights' dtype) and the weights as save_pretrained writes
  // them: model.safetensors, or shards of at most max_shard_bytes + the index. Adapters are
  // not saved (merge_lora first, or save_lora for the adapter).
  void save_pretrained(const std::string& dir,
                       uint64_t max_shard_bytes = io::kHfDefaultMaxShardBytes) const;

  // Logits [B, T, V] float32 of input_ids [B, T].
  Tensor forward(const Tensor& input_ids) override;
  Tensor forward(const LlamaInput& input);
  // forward = head(hidden_states(input)): the final norm's output [B, T, D], and the output
  // layer (lm_head, or the embedding when tied) with the parameters it uses.
  Tensor hidden_states(const LlamaInput& input);
  Tensor head(const Tensor& hidden);
  std::vector<Tensor> head_parameters() const;

  const LlamaConfig& config() const { return config_; }
  // The weights under HF's names (no adapters; no lm_head.weight when tied).
  std::map<std::string, Tensor> hf_state() const;
  DType weight_dtype() const;  // the embedding's storage dtype

  // Every linear layer by module path ("model.layers.0.self_attn.q_proj", ..., "lm_head" when
  // untied), in model order.
  std::vector<std::pair<std::string, std::shared_ptr<nn::LoraLinear>>> linear_layers() const;
  // Base weights stop (or start) requiring gradients; adapter weights keep theirs.
  void freeze_base(bool frozen = true);

  // Recompute each decoder layer in backward instead of keeping its activations: memory for
  // time. Applies when gradients are recorded and no KV cache is used. `policy` says which
  // outputs of the layer's forward are kept for the recompute (those ops are not run again):
  // "full" none (only the layer's input), "selective" the costly ones (kSelectiveCheckpointing),
  // or a comma list of q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, attention.
  void set_activation_checkpointing(bool enabled, const std::string& policy = "full");
  bool activation_checkpointing() const { return checkpointing_; }
  // What each checkpointed layer keeps (empty: "full").
  const std::vector<std::string>& checkpointing_keeps() const { return checkpoint_keeps_; }

  // Mixed precision (MindSpore's amp levels, for finetune --amp): `dtype` bf16 or f16 runs every
  // linear layer in it (LoraLinear::set_compute_dtype: O1); `all_but_norms` also the LoRA
  // matmuls and the hidden states between layers (embedding output, each decoder layer's
  // output), the RMS norms staying float32 (O2). float32: off. Weights keep their dtype.
  void set_low_precision(DType dtype, bool all_but_norms = false);

  // Quantized weights (src/models/llama_quant.cpp): every linear layer's weight becomes blocks
  // of `format`, multiplied by ops::quantized_linear (a layer whose in_features is no multiple of
  // q4_k's 256 takes q4_0; of 32, stays float). The tied output layer and the embedding stay.
  // Returns each quantized layer's format by module path.
  std::map<std::string, QuantFormat> quantize(QuantFormat format);
  // Installs blocks read from a file (GGUF, `zenith quantize`'s safetensors) unchanged on the
  // linear layer at `path` (as linear_layers() names it).
  void set_quantized_weight(const std::string& path, QuantizedWeight weight);

  std::string type_name() const override { return config_.architecture; }

  struct Parts;  // the cells of the tree, typed (defined in src/models/llama_layers.h)

 private:
  void build(const std::function<Tensor(const std::string&, const Shape&)>& take);
  LlamaConfig config_;
  std::shared_ptr<Parts> parts_;
  Tensor inv_freq_;  // float64 [head_dim / 2], rope_theta and rope_scaling applied
  bool checkpointing_ = false;
  std::vector<std::string> checkpoint_keeps_;
  DType lowp_ = DType::f32;            // hidden states rounded to this between layers (O2)
  DType tied_head_lowp_ = DType::f32;  // the tied lm_head's matmul in this (O1, O2)
};

// A model directory with quantized linear layers (`zenith quantize`): config.json's
// quantization_config {"quant_method": "ggml", "layers": {path: "q8_0" | "q4_0" | "q4_k"}} and the
// blocks as U8 tensors [out, row bytes] under the layers' weight names.
bool is_quantized_dir(const std::string& dir);
std::shared_ptr<Llama> load_quantized(const std::string& dir);
void save_quantized(const Llama& model, const std::string& dir);

// Copies a model directory's tokenizer and generation files (tokenizer.json, tokenizer.model,
// tokenizer_config.json, special_tokens_map.json, generation_config.json) that exist to `to`.
void copy_model_side_files(const std::string& from, const std::string& to);

// HF's causal-LM loss: mean cross entropy of logits [B, T, V] at t against labels [B, T] at
// t + 1; labels of -100 are ignored.
Tensor causal_lm_loss(const Tensor& logits, const Tensor& labels);
// The same loss of model.forward(input), without the [B, T, V] logits: when gradients are
// recorded, the output layer and the cross entropy run on chunks of positions and each chunk's
// gradients (for the hidden states and the head's trainable parameters) are taken at once, so
// only one chunk's logits exist at a time; backward scales the kept gradients. Without
// gradients it is causal_lm_loss(model.forward(input), labels).
Tensor causal_lm_loss(Llama& model, const LlamaInput& input, const Tensor& labels);

// ---- LoRA (PEFT semantics; adapter files through io::load_lora_adapter / save_lora_adapter)

// Module paths of the linear layers `config` targets (suffix match, all-linear, a regex,
// layers_to_transform). Each name in target_modules must match some layer: errors list the
// model's linear layer names.
std::vector<std::string> lora_targets(const Llama& model, const io::LoraConfig& config);
// Fresh adapters (A kaiming-uniform, B zero: the model computes what it did) on every target;
// returns the module paths.
std::vector<std::string> add_lora(Llama& model, const io::LoraConfig& config);
// An adapter's weights, checked against the model (check_lora_adapter), applied unmerged.
void apply_lora(Llama& model, const io::LoraAdapter& adapter, const std::string& source = "");
void load_lora(Llama& model, const std::string& adapter_dir);
// The adapters on the model as a PEFT adapter with `config`'s settings (weights float32).
io::LoraAdapter lora_adapter(const Llama& model, const io::LoraConfig& config);
void save_lora(const Llama& model, const io::LoraConfig& config, const std::string& dir);
// W += B A scaling for every adapter, in each base weight's dtype; the adapters are removed.
// Returns the merged module paths.
std::vector<std::string> merge_lora(Llama& model);

// ---- generation

struct GenerationConfig {
  int64_t max_new_tokens = 128;
  double temperature = 1.0;         // 0: greedy (argmax)
  int64_t top_k = 0;                // 0: off
  double top_p = 1.0;               // 1: off
  double repetition_penalty = 1.0;  // HF's RepetitionPenaltyLogitsProcessor; 1: off
  uint64_t seed = 0;
  std::vector<int64_t> eos_token_ids;  // generation stops after any of these
};

// Settings a caller gave explicitly (CLI flags, Python arguments); unset ones come from the model.
struct GenerationOverrides {
  std::optional<int64_t> max_new_tokens;
  std::optional<double> temperature;
  std::optional<int64_t> top_k;
  std::optional<double> top_p;
  std::optional<double> repetition_penalty;
  std::optional<bool> do_sample;
  std::optional<uint64_t> seed;
};

// The decoding settings `zenith generate` and zenith.llm's generate() use, as transformers
// chooses them: `model_dir`'s generation_config.json where present (do_sample, default false;
// temperature 1.0, top_k 50, top_p 1.0, repetition_penalty 1.0, max_new_tokens), else greedy;
// max_new_tokens 128 when neither says. Then `given` wins: do_sample=false or temperature 0 is
// greedy; an explicit temperature > 0, top_k or top_p samples unless do_sample=false was given.
// Errors name generation_config.json and the key.
GenerationConfig resolve_generation_config(const std::string& model_dir,
                                           const GenerationOverrides& given = {});

struct GenerationResult {
  std::vector<int64_t> tokens;  // generated ids, prompt excluded (an eos that stopped it included)
  // "eos", "max_new_tokens", or "context": the context (max_position_embeddings) is full.
  std::string stop_reason;
};

// Decodes one sequence with a KV cache: the prompt in one forward pass, then one token per
// step. Errors (naming the value): an empty prompt, an id outside [0, vocab_size), a prompt of
// max_position_embeddings tokens or more (nothing could be generated within the context), bad
// sampling settings. Generation stops at an eos id, after max_new_tokens, or when the context is
// full. `on_token` sees each id as it is chosen (streaming).
GenerationResult generate(Llama& model, const std::vector<int64_t>& prompt,
                          const GenerationConfig& config,
                          const std::function<void(int64_t)>& on_token = {});

// The sampling step on one row of logits (modified in place), with `history` the ids so far
// (prompt and generated): HF's order — repetition penalty, then greedy when temperature is 0,
// else temperature, top-k, top-p, and a draw from the softmax with `rng`.
class TokenSampler {
 public:
  explicit TokenSampler(const GenerationConfig& config);
  int64_t next(std::vector<float>& logits, const std::vector<int64_t>& history);

 private:
  GenerationConfig config_;
  uint64_t state_;  // splitmix64: the same draws on every platform
};

struct PerplexityResult {
  double nll = 0;         // mean negative log-likelihood per predicted token (nats)
  double perplexity = 0;  // exp(nll)
  int64_t tokens = 0;     // tokens predicted: every id but the first
};
// Mean next-token NLL of `ids` (at least 2) in windows of max_seq_len tokens that overlap by one
// token, so each id but the first is predicted exactly once, with at most max_seq_len - 1
// tokens of context. max_seq_len 0 means max_position_embeddings.
PerplexityResult perplexity(Llama& model, const std::vector<int64_t>& ids, int64_t max_seq_len = 0);

}  // namespace zenith::models
