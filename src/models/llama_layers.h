// The cells of models::Llama, named as Hugging Face's LlamaForCausalLM modules so that the
// dotted parameter names are HF's: model.embed_tokens, model.layers.N.{self_attn,mlp,
// input_layernorm,post_attention_layernorm}, model.norm, lm_head.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "zenith/llama.h"

namespace zenith::models::detail {

// Gives each parameter its tensor: a loaded one or a fresh initialised one.
using TakeWeight = std::function<Tensor(const std::string& name, const Shape& shape)>;

// What every decoder layer of one forward pass shares.
struct LayerContext {
  Tensor cos, sin;          // rotary tables [B or 1, T, head_dim], float32
  Tensor key_padding_mask;  // [B, past + T] or undefined
  KVCache* cache = nullptr;
  AttentionStore* store = nullptr;  // packed serving: attention and after_linear through it
};

// proj(x), then the store's after_linear under `path` when there is a store.
Tensor project(nn::LoraLinear& proj, const std::string& path, const Tensor& x,
               const LayerContext& ctx);

class RmsNormCell : public nn::Cell {
 public:
  RmsNormCell(const std::string& name, int64_t dim, double eps, const TakeWeight& take);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "LlamaRMSNorm"; }

 private:
  Tensor weight_;
  int64_t dim_;
  double eps_;
};

class EmbeddingCell : public nn::Cell {
 public:
  EmbeddingCell(const std::string& name, int64_t vocab, int64_t dim, const TakeWeight& take);
  Tensor forward(const Tensor& ids) override;
  const Tensor& weight() const { return weight_; }
  std::string type_name() const override { return "Embedding"; }

 private:
  Tensor weight_;
};

class AttentionCell : public nn::Cell {
 public:
  AttentionCell(const LlamaConfig& c, const std::string& prefix, const TakeWeight& take);
  Tensor forward(const Tensor& x) override;  // not used: needs the layer context
  // x [B, T, hidden] -> [B, T, hidden]
  Tensor forward(const Tensor& x, const LayerContext& ctx, int64_t layer);
  std::string type_name() const override { return "LlamaAttention"; }
  // Attention in bfloat16 arithmetic (Llama::set_low_precision, where the CPU has it): q, k, v
  // rounded to bfloat16 for queries of more than 8 rows (training, prefill; decode steps stay
  // float32), the output widened back.
  void set_bf16_arithmetic(bool on) { bf16_ = on; }

  std::shared_ptr<nn::LoraLinear> q_proj, k_proj, v_proj, o_proj;

 private:
  int64_t heads_, kv_heads_, head_dim_;
  std::string prefix_;  // "model.layers.N.self_attn."
  bool bf16_ = false;
};

class MlpCell : public nn::Cell {
 public:
  MlpCell(const LlamaConfig& c, const std::string& prefix, const TakeWeight& take);
  // down(silu(gate(x)) * up(x))
  Tensor forward(const Tensor& x) override;
  Tensor forward(const Tensor& x, const LayerContext& ctx);
  std::string type_name() const override { return "LlamaMLP"; }

  std::shared_ptr<nn::LoraLinear> gate_proj, up_proj, down_proj;

 private:
  std::string prefix_;  // "model.layers.N.mlp."
};

class DecoderLayerCell : public nn::Cell {
 public:
  DecoderLayerCell(const LlamaConfig& c, int64_t index, const TakeWeight& take);
  Tensor forward(const Tensor& x) override;  // not used: needs the layer context
  Tensor forward(const Tensor& x, const LayerContext& ctx);
  std::string type_name() const override { return "LlamaDecoderLayer"; }
  int64_t index() const { return index_; }

  std::shared_ptr<AttentionCell> self_attn;
  std::shared_ptr<MlpCell> mlp;

 private:
  int64_t index_;
  std::shared_ptr<RmsNormCell> input_layernorm_, post_attention_layernorm_;
};

// A list of cells named 0, 1, ... (PyTorch's ModuleList).
class CellList : public nn::Cell {
 public:
  void append(nn::CellPtr cell) { register_cell(std::to_string(named_children().size()), cell); }
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "ModuleList"; }
};

// HF's LlamaModel: embeddings, decoder layers, final norm.
class DecoderCell : public nn::Cell {
 public:
  DecoderCell(const LlamaConfig& c, const TakeWeight& take);
  Tensor forward(const Tensor& x) override;  // not used: Llama::forward drives the layers
  std::string type_name() const override { return "LlamaModel"; }

  std::shared_ptr<EmbeddingCell> embed_tokens;
  std::vector<std::shared_ptr<DecoderLayerCell>> layers;
  std::shared_ptr<RmsNormCell> norm;
};

// `t` is an integer tensor (bool too for an attention_mask) of `shape`; errors name `what`.
void check_integer(const Tensor& t, const char* what, const Shape& shape);

// The ops whose outputs a selectively checkpointed layer keeps from its forward: linear ops on
// these weights (the very tensors) and, with `attention`, the fused attention (output and
// logsumexp). `where` names the layer in errors.
struct KeptOutputs {
  std::vector<Tensor> weights;
  bool attention = false;
  std::string where = "checkpointed layer";
};

// "selective", "full" or a comma list (Llama::set_activation_checkpointing) as the names kept;
// empty for full. Unknown names fail, listing the known ones.
std::vector<std::string> parse_checkpoint_policy(const std::string& policy);
KeptOutputs kept_outputs(const DecoderLayerCell& layer, const std::vector<std::string>& keep);
// Bytes of outputs kept by checkpointed layers now alive, on every thread (0 after backward).
int64_t checkpoint_kept_bytes();

// Activation checkpointing: runs fn(x) without recording the graph inside it and records one
// node whose backward runs fn again (with the random generator as it was, so dropout draws the
// same mask) and differentiates that, for x and `params` (those that require grad). The ops
// `keep` selects keep their outputs from the first run and are not run again: the recompute
// takes the outputs back in call order (its ops and shapes must match; one backward per forward).
Tensor checkpoint(std::function<Tensor(const Tensor&)> fn, const Tensor& x,
                  const std::vector<Tensor>& params, const KeptOutputs& keep = {});

}  // namespace zenith::models::detail

namespace zenith::models {

struct Llama::Parts {
  std::shared_ptr<detail::DecoderCell> model;
  std::shared_ptr<nn::LoraLinear> lm_head;  // null when tied to the embedding
};

}  // namespace zenith::models
