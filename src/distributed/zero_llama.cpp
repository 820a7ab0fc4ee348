#include "distributed/zero_llama.h"

#include "models/llama_layers.h"
#include "zenith/error.h"

namespace zenith::distributed {

namespace {

std::shared_ptr<models::detail::DecoderCell> decoder_of(const models::Llama& model) {
  for (const auto& [name, c] : model.named_children())
    if (name == "model") return std::dynamic_pointer_cast<models::detail::DecoderCell>(c);
  ZENITH_FAIL("[zero] the model has no LlamaModel under 'model'");
}

// The final norm's output [B, T, D], every module through ZeRO-3.
Tensor zero3_hidden(models::Llama& model, const std::shared_ptr<ZeroOptimizer>& zero,
                    const Tensor& input_ids, const Tensor& attention_mask) {
  const models::LlamaConfig& c = model.config();
  ZENITH_CHECK(c.rope_scaling.type == models::RopeScaling::Type::none,
               "[zero] zero3_llama_logits: rope scaling is not supported");
  auto decoder = decoder_of(model);
  auto embed = decoder->embed_tokens;
  Tensor x = sharded_forward(
      zero, zero_indices(*zero, *embed), [embed](const Tensor& t) { return embed->forward(t); },
      input_ids);
  models::detail::LayerContext ctx;
  ops::RopeOptions rope;
  rope.theta = c.rope_theta;
  const int64_t t = input_ids.size(1);
  std::tie(ctx.cos, ctx.sin) =
      ops::rope_cos_sin(ops::rope_inv_freq(c.head_dim, rope), Tensor::arange(t).view({1, t}));
  ctx.key_padding_mask = attention_mask;
  for (const auto& layer : decoder->layers)
    x = sharded_forward(
        zero, zero_indices(*zero, *layer),
        [layer, ctx](const Tensor& h) { return layer->forward(h, ctx); }, x);
  auto norm = decoder->norm;
  return sharded_forward(
      zero, zero_indices(*zero, *norm), [norm](const Tensor& h) { return norm->forward(h); }, x);
}

// The output layer's parameter index: lm_head, or the embedding itself when tied.
size_t head_index(models::Llama& model, const ZeroOptimizer& zero) {
  const models::LlamaConfig& c = model.config();
  // The output layer: lm_head, or the embedding itself when tied.
  int head = -1;
  for (const auto& [name, p] : model.named_parameters())
    if (name == (c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight"))
      head = zero.index_of(p);
  ZENITH_CHECK(head >= 0,
               "[zero] zero3_llama_logits: the output layer's weight is not a ZeRO parameter");
  return size_t(head);
}

}  // namespace

Tensor zero3_llama_logits(models::Llama& model, const std::shared_ptr<ZeroOptimizer>& zero,
                          const Tensor& input_ids) {
  Tensor x = zero3_hidden(model, zero, input_ids, Tensor());
  models::Llama* m = &model;
  return sharded_forward(
      zero, {head_index(model, *zero)}, [m](const Tensor& h) { return m->head(h); }, x);
}

Tensor zero3_llama_loss(models::Llama& model, const std::shared_ptr<ZeroOptimizer>& zero,
                        const Tensor& input_ids, const Tensor& attention_mask, const Tensor& labels,
                        double weight, bool has_targets) {
  Tensor x = zero3_hidden(model, zero, input_ids, attention_mask);
  models::Llama* m = &model;
  return sharded_forward(
      zero, {head_index(model, *zero)},
      [m, labels, weight, has_targets](const Tensor& h) {
        Tensor logits = m->head(h);
        return has_targets ? ops::mul(models::causal_lm_loss(logits, labels), weight)
                           : ops::mul(ops::sum(logits), 0.0);
      },
      x);
}

}  // namespace zenith::distributed
