// models::Llama: construction (random or from HF-named weights), the forward pass, HF's causal-LM
// loss, and the KV cache.
#include "zenith/llama.h"

#include <algorithm>
#include <cstdlib>

#include "core/allocator.h"
#include "core/dispatch.h"
#include "models/llama_layers.h"
#include "zenith/autograd.h"
#include "zenith/cpu_features.h"

namespace zenith::models {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_adapter_name(const std::string& name) {
  return name.find(".lora_A.") != std::string::npos || name.find(".lora_B.") != std::string::npos;
}

double initializer_range(const LlamaConfig& c) {
  auto it = c.extra.find("initializer_range");
  return it == c.extra.end() ? 0.02 : std::strtod(it->second.c_str(), nullptr);
}

ops::RopeOptions rope_options(const LlamaConfig& c) {
  ops::RopeOptions o;
  o.theta = c.rope_theta;
  const RopeScaling& s = c.rope_scaling;
  o.scaling = s.type == RopeScaling::Type::linear   ? "linear"
              : s.type == RopeScaling::Type::llama3 ? "llama3"
                                                    : "default";
  o.factor = s.factor;
  o.low_freq_factor = s.low_freq_factor;
  o.high_freq_factor = s.high_freq_factor;
  o.original_max_position_embeddings = s.original_max_position_embeddings;
  return o;
}

void check_token_ids(const Tensor& ids, int64_t vocab) {
  dispatch::ValidationReads validation;  // graph mode keeps the step: embedding checks too
  const std::vector<int64_t> v = ids.to_int_vector();
  for (size_t i = 0; i < v.size(); ++i)
    ZENITH_CHECK(v[i] >= 0 && v[i] < vocab, "[llama] token id ", v[i], " at position ",
                 i % size_t(ids.size(1)), " of sequence ", i / size_t(ids.size(1)),
                 " is outside the vocabulary [0, ", vocab, ")");
}

}  // namespace

namespace detail {

void check_integer(const Tensor& t, const char* what, const Shape& shape) {
  ZENITH_CHECK(t.dtype() == DType::i64 || t.dtype() == DType::i32 ||
                   (t.dtype() == DType::b8 && std::string(what) == "attention_mask"),
               "[llama] ", what, " must be integer, got ", dtype_name(t.dtype()));
  ZENITH_CHECK(t.shape() == shape, "[llama] ", what, " has shape ", shape_str(t.shape()),
               ", expected ", shape_str(shape));
}

}  // namespace detail

// ---- construction

Llama::Llama(LlamaConfig config, DType dtype) : config_(std::move(config)) {
  ZENITH_CHECK(is_floating(dtype), "[llama] weights must be floating point, got ",
               dtype_name(dtype));
  const double stddev = initializer_range(config_);
  build([&](const std::string& name, const Shape& shape) {
    Tensor w;
    if (ends_with(name, "norm.weight")) {
      w = Tensor::ones(shape);
    } else if (ends_with(name, ".bias")) {
      w = Tensor::zeros(shape);
    } else {
      w = Tensor::empty(shape);
      nn::init::normal_(w, 0.0, stddev);
    }
    return dtype == DType::f32 ? w : w.to(dtype);
  });
  // The float32 draws went to the allocator's cache, where allocations of other sizes never
  // reuse them: as resident memory they would sit under a bf16 LoRA's training peak.
  if (dtype != DType::f32) core::empty_allocator_cache();
}

Llama::Llama(LlamaConfig config, std::map<std::string, Tensor> weights, const std::string& source)
    : config_(std::move(config)) {
  check_llama_state(config_, weights, source);
  build([&](const std::string& name, const Shape&) {
    auto it = weights.find(name);
    ZENITH_CHECK(it != weights.end(), "[llama] ", source, ": missing tensor '", name, "'");
    Tensor w = it->second.contiguous();
    weights.erase(it);
    return w;
  });
}

void Llama::build(const std::function<Tensor(const std::string&, const Shape&)>& take) {
  parts_ = std::make_shared<Parts>();
  parts_->model = register_cell("model", std::make_shared<detail::DecoderCell>(config_, take));
  if (!config_.tie_word_embeddings)
    parts_->lm_head =
        register_cell("lm_head", std::make_shared<nn::LoraLinear>(take(
                                     "lm_head.weight", {config_.vocab_size, config_.hidden_size})));
  inv_freq_ = ops::rope_inv_freq(config_.head_dim, rope_options(config_));
}

// ---- forward

Tensor Llama::forward(const Tensor& input_ids) {
  LlamaInput input;
  input.input_ids = input_ids;
  return forward(input);
}

Tensor Llama::forward(const LlamaInput& in) {
  Tensor hidden = hidden_states(in);
  Tensor logits = head(hidden);
  return in.store && parts_->lm_head ? in.store->after_linear("lm_head", hidden, logits) : logits;
}

Tensor Llama::head(const Tensor& hidden) {
  if (parts_->lm_head) return parts_->lm_head->forward(hidden);
  const Tensor& w = parts_->model->embed_tokens->weight();
  // Decode rows (up to 8) on 16-bit weights stay on the GEMV, as in LoraLinear::forward.
  const bool decode = !training() && w.dtype() == tied_head_lowp_ && hidden.dim() >= 1 &&
                      hidden.numel() <= 8 * hidden.size(-1);
  if (tied_head_lowp_ == DType::f32 || decode) return ops::linear(hidden, w);
  // A tied head in low precision, as LoraLinear::set_compute_dtype computes: both operands in
  // the low dtype (bfloat16 arithmetic where the CPU has it), the result rounded to it.
  return ops::linear(hidden.to(tied_head_lowp_),
                     w.dtype() == tied_head_lowp_ ? w : w.to(tied_head_lowp_))
      .to(hidden.dtype());
}

std::vector<Tensor> Llama::head_parameters() const {
  return parts_->lm_head ? parts_->lm_head->parameters()
                         : std::vector<Tensor>{parts_->model->embed_tokens->weight()};
}

Tensor Llama::hidden_states(const LlamaInput& in) {
  const Tensor& ids = in.input_ids;
  ZENITH_CHECK(ids.defined() && ids.dim() == 2, "[llama] input_ids must be [batch, seq], got ",
               ids.defined() ? shape_str(ids.shape()) : "none");
  const int64_t b = ids.size(0), t = ids.size(1);
  ZENITH_CHECK(t > 0, "[llama] input_ids is empty");
  detail::check_integer(ids, "input_ids", ids.shape());
  check_token_ids(ids, config_.vocab_size);
  KVCache* cache = in.cache;
  const int64_t past = cache ? cache->length() : 0;
  if (cache)
    ZENITH_CHECK(cache->batch() == b && cache->num_layers() == config_.num_hidden_layers,
                 "[llama] the KV cache holds ", cache->batch(), " sequences of ",
                 cache->num_layers(), " layers; input_ids has ", b, " and the model ",
                 config_.num_hidden_layers);
  detail::LayerContext ctx;
  ctx.cache = cache;
  ctx.store = in.store;
  if (in.store)
    ZENITH_CHECK(b == 1 && !cache && !in.attention_mask.defined() && in.position_ids.defined(),
                 "[llama] a forward through an AttentionStore takes packed input_ids [1, N] with "
                 "position_ids and no KV cache or attention_mask");
  if (in.attention_mask.defined()) {
    detail::check_integer(in.attention_mask, "attention_mask", {b, past + t});
    ctx.key_padding_mask = in.attention_mask;
  }
  Tensor positions = in.position_ids;
  if (positions.defined()) {
    detail::check_integer(positions, "position_ids", {b, t});
  } else {
    std::vector<int64_t> arange(static_cast<size_t>(t));
    for (int64_t i = 0; i < t; ++i) arange[size_t(i)] = past + i;
    positions = Tensor::from_vector(arange, {1, t});
  }
  std::tie(ctx.cos, ctx.sin) = ops::rope_cos_sin(inv_freq_, positions, DType::f32);

  const detail::DecoderCell& model = *parts_->model;
  // O2 (set_low_precision): hidden states stored in low precision between the layers.
  auto store = [this](const Tensor& h) {
    return lowp_ == DType::f32 ? h : h.to(lowp_).to(h.dtype());
  };
  Tensor x = store(model.embed_tokens->forward(ids));
  const bool recompute = checkpointing_ && !cache && autograd::grad_enabled();
  for (const auto& layer : model.layers) {
    if (recompute) {
      x = store(detail::checkpoint([layer, ctx](const Tensor& h) { return layer->forward(h, ctx); },
                                   x, layer->parameters(),
                                   detail::kept_outputs(*layer, checkpoint_keeps_)));
    } else {
      x = store(layer->forward(x, ctx));
    }
  }
  if (cache) cache->advance(t);
  if (in.last_position_only && t > 1) x = x.slice(1, t - 1, t);
  if (in.logit_rows.defined()) {
    const Tensor& rows = in.logit_rows;
    detail::check_integer(rows, "logit_rows", {rows.numel()});
    for (int64_t r : rows.to_int_vector())
      ZENITH_CHECK(r >= 0 && r < x.size(1), "[llama] logit_rows has row ", r, " outside [0, ",
                   x.size(1), ")");
    x = ops::index_select(x, 1, rows);
  }
  return model.norm->forward(x);
}

void Llama::set_low_precision(DType dtype, bool all_but_norms) {
  ZENITH_CHECK(dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16,
               "[llama] low precision must be bfloat16 or float16 (float32: off), got ",
               dtype_name(dtype));
  for (const auto& [path, layer] : linear_layers()) layer->set_compute_dtype(dtype, all_but_norms);
  for (const auto& layer : parts_->model->layers)
    layer->self_attn->set_bf16_arithmetic(dtype == DType::bf16 && bf16_arithmetic());
  tied_head_lowp_ = dtype;
  lowp_ = all_but_norms ? dtype : DType::f32;
}

// ---- parts

std::map<std::string, Tensor> Llama::hf_state() const {
  std::map<std::string, Tensor> out;
  for (auto& [name, p] : named_parameters())
    if (!is_adapter_name(name)) out.emplace(name, p.detach());
  return out;
}

DType Llama::weight_dtype() const { return parts_->model->embed_tokens->weight().dtype(); }

std::vector<std::pair<std::string, std::shared_ptr<nn::LoraLinear>>> Llama::linear_layers() const {
  std::vector<std::pair<std::string, std::shared_ptr<nn::LoraLinear>>> out;
  const auto& layers = parts_->model->layers;
  for (size_t i = 0; i < layers.size(); ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    const auto& a = *layers[i]->self_attn;
    const auto& m = *layers[i]->mlp;
    out.insert(out.end(), {{p + "self_attn.q_proj", a.q_proj},
                           {p + "self_attn.k_proj", a.k_proj},
                           {p + "self_attn.v_proj", a.v_proj},
                           {p + "self_attn.o_proj", a.o_proj},
                           {p + "mlp.gate_proj", m.gate_proj},
                           {p + "mlp.up_proj", m.up_proj},
                           {p + "mlp.down_proj", m.down_proj}});
  }
  if (parts_->lm_head) out.emplace_back("lm_head", parts_->lm_head);
  return out;
}

void Llama::freeze_base(bool frozen) {
  for (auto& [name, p] : named_parameters())
    if (!is_adapter_name(name)) p.requires_grad_(!frozen);
}

// ---- KV cache

KVCache::KVCache(const LlamaConfig& config, int64_t batch, int64_t capacity)
    : batch_(batch), kv_heads_(config.num_key_value_heads), head_dim_(config.head_dim) {
  ZENITH_CHECK(batch > 0, "[llama] KV cache batch must be positive, got ", batch);
  keys_.resize(size_t(config.num_hidden_layers));
  values_.resize(size_t(config.num_hidden_layers));
  if (capacity > 0) reserve(capacity);
}

void KVCache::reserve(int64_t capacity) {
  if (capacity <= capacity_) return;
  for (size_t i = 0; i < keys_.size(); ++i) {
    for (Tensor* buf : {&keys_[i], &values_[i]}) {
      Tensor grown = Tensor::empty({batch_, kv_heads_, capacity, head_dim_});
      if (length_ > 0) grown.slice(2, 0, length_).copy_(buf->slice(2, 0, length_));
      *buf = grown;
    }
  }
  capacity_ = capacity;
}

std::pair<Tensor, Tensor> KVCache::append(int64_t layer, const Tensor& k, const Tensor& v) {
  ZENITH_CHECK(layer >= 0 && layer < num_layers(), "[llama] KV cache has no layer ", layer);
  const int64_t t = k.size(2), end = length_ + t;
  const Shape want = {batch_, kv_heads_, t, head_dim_};
  ZENITH_CHECK(k.shape() == want && v.shape() == want, "[llama] KV cache expects keys and values ",
               shape_str(want), ", got ", shape_str(k.shape()), " and ", shape_str(v.shape()));
  if (end > capacity_) reserve(std::max(end, 2 * capacity_));
  NoGradGuard no_grad;
  Tensor keys = keys_[size_t(layer)], values = values_[size_t(layer)];
  keys.slice(2, length_, end).copy_(k);
  values.slice(2, length_, end).copy_(v);
  return {keys.slice(2, 0, end), values.slice(2, 0, end)};
}

void KVCache::advance(int64_t t) { length_ += t; }

}  // namespace zenith::models
