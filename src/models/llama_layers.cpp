// The cells of models::Llama: RMSNorm, embedding, attention (grouped-query, rotary, KV cache),
// SwiGLU MLP, decoder layer, the decoder. Weights keep their storage dtype; activations are
// float32.
#include "models/llama_layers.h"

#include <tuple>

namespace zenith::models::detail {
namespace {

std::shared_ptr<nn::LoraLinear> linear(const TakeWeight& take, const std::string& name, int64_t out,
                                       int64_t in, bool bias) {
  return std::make_shared<nn::LoraLinear>(take(name + ".weight", {out, in}),
                                          bias ? take(name + ".bias", {out}) : Tensor());
}

[[noreturn]] void needs_context(const char* cell) {
  ZENITH_FAIL("[llama] ", cell, " runs inside Llama::forward (it needs the rotary tables)");
}

}  // namespace

RmsNormCell::RmsNormCell(const std::string& name, int64_t dim, double eps, const TakeWeight& take)
    : dim_(dim), eps_(eps) {
  weight_ = register_parameter("weight", take(name + ".weight", {dim}));
}

Tensor RmsNormCell::forward(const Tensor& x) { return ops::rms_norm(x, {dim_}, weight_, eps_); }

EmbeddingCell::EmbeddingCell(const std::string& name, int64_t vocab, int64_t dim,
                             const TakeWeight& take) {
  weight_ = register_parameter("weight", take(name + ".weight", {vocab, dim}));
}

Tensor EmbeddingCell::forward(const Tensor& ids) { return ops::embedding(weight_, ids); }

AttentionCell::AttentionCell(const LlamaConfig& c, const std::string& prefix,
                             const TakeWeight& take)
    : heads_(c.num_attention_heads),
      kv_heads_(c.num_key_value_heads),
      head_dim_(c.head_dim),
      prefix_(prefix) {
  q_proj = register_cell("q_proj",
                         linear(take, prefix + "q_proj", c.q_dim(), c.hidden_size, c.qkv_bias()));
  k_proj = register_cell("k_proj",
                         linear(take, prefix + "k_proj", c.kv_dim(), c.hidden_size, c.qkv_bias()));
  v_proj = register_cell("v_proj",
                         linear(take, prefix + "v_proj", c.kv_dim(), c.hidden_size, c.qkv_bias()));
  o_proj = register_cell("o_proj",
                         linear(take, prefix + "o_proj", c.hidden_size, c.q_dim(), c.o_bias()));
}

Tensor AttentionCell::forward(const Tensor&) { needs_context("LlamaAttention"); }

Tensor AttentionCell::forward(const Tensor& x, const LayerContext& ctx, int64_t layer) {
  const int64_t b = x.size(0);
  // [B, T, heads * D] -> [B, heads, T, D] (a view; the ops take strided inputs). T is the
  // projections' own: x may hold a slice of the sequence that they gather (sequence parallel).
  auto split = [&](const Tensor& y, int64_t heads) {
    return y.view({b, y.size(1), heads, head_dim_}).transpose(1, 2);
  };
  auto proj = [&](nn::LoraLinear& p, const char* name, const Tensor& in) {
    return project(p, prefix_ + name, in, ctx);
  };
  Tensor q = ops::rotary_embedding(split(proj(*q_proj, "q_proj", x), heads_), ctx.cos, ctx.sin);
  Tensor k = ops::rotary_embedding(split(proj(*k_proj, "k_proj", x), kv_heads_), ctx.cos, ctx.sin);
  Tensor v = split(proj(*v_proj, "v_proj", x), kv_heads_);
  Tensor o;
  if (ctx.store) {
    o = ctx.store->attend(layer, q, k, v);
  } else {
    if (ctx.cache) std::tie(k, v) = ctx.cache->append(layer, k, v);
    ops::AttentionOptions options;
    options.causal = true;
    options.key_padding_mask = ctx.key_padding_mask;
    if (bf16_ && q.size(2) > 8) {
      const DType t = DType::bf16;
      o = ops::scaled_dot_product_attention(q.to(t), k.to(t), v.to(t), options).to(q.dtype());
    } else {
      o = ops::scaled_dot_product_attention(q, k, v, options);
    }
  }
  return proj(*o_proj, "o_proj", o.transpose(1, 2).reshape({b, o.size(2), heads_ * head_dim_}));
}

Tensor project(nn::LoraLinear& proj, const std::string& path, const Tensor& x,
               const LayerContext& ctx) {
  Tensor y = proj.forward(x);
  return ctx.store ? ctx.store->after_linear(path, x, y) : y;
}

MlpCell::MlpCell(const LlamaConfig& c, const std::string& prefix, const TakeWeight& take)
    : prefix_(prefix) {
  const int64_t h = c.hidden_size, inter = c.intermediate_size;
  gate_proj = register_cell("gate_proj", linear(take, prefix + "gate_proj", inter, h, c.mlp_bias));
  up_proj = register_cell("up_proj", linear(take, prefix + "up_proj", inter, h, c.mlp_bias));
  down_proj = register_cell("down_proj", linear(take, prefix + "down_proj", h, inter, c.mlp_bias));
}

Tensor MlpCell::forward(const Tensor& x) { return forward(x, LayerContext{}); }

Tensor MlpCell::forward(const Tensor& x, const LayerContext& ctx) {
  Tensor h = ops::swiglu(project(*gate_proj, prefix_ + "gate_proj", x, ctx),
                         project(*up_proj, prefix_ + "up_proj", x, ctx));
  return project(*down_proj, prefix_ + "down_proj", h, ctx);
}

DecoderLayerCell::DecoderLayerCell(const LlamaConfig& c, int64_t index, const TakeWeight& take)
    : index_(index) {
  const std::string prefix = "model.layers." + std::to_string(index) + ".";
  self_attn =
      register_cell("self_attn", std::make_shared<AttentionCell>(c, prefix + "self_attn.", take));
  mlp = register_cell("mlp", std::make_shared<MlpCell>(c, prefix + "mlp.", take));
  input_layernorm_ = register_cell(
      "input_layernorm", std::make_shared<RmsNormCell>(prefix + "input_layernorm", c.hidden_size,
                                                       c.rms_norm_eps, take));
  post_attention_layernorm_ =
      register_cell("post_attention_layernorm",
                    std::make_shared<RmsNormCell>(prefix + "post_attention_layernorm",
                                                  c.hidden_size, c.rms_norm_eps, take));
}

Tensor DecoderLayerCell::forward(const Tensor&) { needs_context("LlamaDecoderLayer"); }

Tensor DecoderLayerCell::forward(const Tensor& x, const LayerContext& ctx) {
  Tensor h = ops::add(x, self_attn->forward(input_layernorm_->forward(x), ctx, index_));
  return ops::add(h, mlp->forward(post_attention_layernorm_->forward(h), ctx));
}

Tensor CellList::forward(const Tensor&) {
  ZENITH_FAIL("[ModuleList] holds cells and has no forward of its own");
}

DecoderCell::DecoderCell(const LlamaConfig& c, const TakeWeight& take) {
  embed_tokens = register_cell(
      "embed_tokens",
      std::make_shared<EmbeddingCell>("model.embed_tokens", c.vocab_size, c.hidden_size, take));
  auto list = register_cell("layers", std::make_shared<CellList>());
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    layers.push_back(std::make_shared<DecoderLayerCell>(c, i, take));
    list->append(layers.back());
  }
  norm = register_cell(
      "norm", std::make_shared<RmsNormCell>("model.norm", c.hidden_size, c.rms_norm_eps, take));
}

Tensor DecoderCell::forward(const Tensor&) { needs_context("LlamaModel"); }

}  // namespace zenith::models::detail
