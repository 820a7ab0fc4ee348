#include "distributed/zero_llama.h"

#include <cstdlib>

#include "core/allocator.h"
#include "distributed/parallelize_llama.h"
#include "models/llama_layers.h"
#include "zenith/error.h"
#include "zenith/hf.h"
#include "zenith/io.h"
#include "zenith/nn.h"
#include "zenith/random.h"

namespace zenith::distributed {

Tensor llama_hidden_by_module(const models::LlamaConfig& c,
                              const models::detail::DecoderCell& decoder, const Tensor& input_ids,
                              const Tensor& attention_mask, const ModuleRunner& run) {
  auto embed = decoder.embed_tokens;
  Tensor x = run(
      *embed, [embed](const Tensor& t) { return embed->forward(t); }, input_ids);
  models::detail::LayerContext ctx;
  ops::RopeOptions rope;
  rope.theta = c.rope_theta;
  const int64_t t = input_ids.size(1);
  std::tie(ctx.cos, ctx.sin) =
      ops::rope_cos_sin(ops::rope_inv_freq(c.head_dim, rope), Tensor::arange(t).view({1, t}));
  ctx.key_padding_mask = attention_mask;
  for (const auto& layer : decoder.layers)
    x = run(
        *layer, [layer, ctx](const Tensor& h) { return layer->forward(h, ctx); }, x);
  auto norm = decoder.norm;
  return run(
      *norm, [norm](const Tensor& h) { return norm->forward(h); }, x);
}

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
  return llama_hidden_by_module(
      c, *decoder, input_ids, attention_mask,
      [&zero](const nn::Cell& module, std::function<Tensor(const Tensor&)> fn, const Tensor& x) {
        return sharded_forward(zero, zero_indices(*zero, module), std::move(fn), x);
      });
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

Tensor zero3_tensor_parallel_llama_loss(models::Llama& model, const TensorParallelPlan& plan,
                                        const std::shared_ptr<ZeroOptimizer>& zero,
                                        const Tensor& input_ids, const Tensor& attention_mask,
                                        const Tensor& labels, double weight, bool has_targets) {
  Tensor x = zero3_hidden(model, zero, input_ids, attention_mask);
  models::Llama* m = &model;
  // The plan is copied: backward's recompute runs after the caller's may be gone.
  return sharded_forward(
      zero, {head_index(model, *zero)},
      [m, plan, labels, weight, has_targets](const Tensor& h) {
        if (has_targets) return ops::mul(tensor_parallel_head_loss(*m, plan, h, labels), weight);
        // No learned label (the same batch on the whole tensor group): zero gradients.
        Tensor whole = plan.tp.sequence_parallel ? gather_sequence(h, 1, plan.tp.group)
                                                 : copy_to_tensor_parallel(h, plan.tp.group);
        Tensor logits = ops::linear(whole, m->head_parameters().front());
        return ops::mul(ops::sum(logits), 0.0);
      },
      x);
}

void zero3_tensor_parallel_sync_gradients(const models::Llama& model,
                                          const TensorParallelPlan& plan,
                                          const ZeroOptimizer& zero) {
  if (plan.degree() == 1) return;
  for (const auto& [name, p] : model.named_parameters()) {
    if (plan.sharded.count(name) ||
        !(plan.tp.sequence_parallel || plan.partial_gradients.count(name)))
      continue;
    const int i = zero.index_of(p);
    if (i < 0) continue;
    const Tensor& grad = zero.shards()[size_t(i)].grad;
    if (grad.defined() && grad.numel() > 0)
      communication::all_reduce(grad, communication::ReduceOp::SUM, plan.tp.group);
  }
}

}  // namespace zenith::distributed

// ---- building without the whole model

namespace zenith::distributed {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A float32 tensor of `shape` whose storage holds no bytes (as ZeroOptimizer::release leaves a
// parameter).
Tensor shape_only(const Shape& shape) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(0, kCPU);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = DType::f32;
  impl->device = kCPU;
  return Tensor(std::move(impl));
}

// Rows [chunk] of a parameter of `shape`, as [chunk.length, shape[1:]...].
Shape rows_shape(Shape shape, const Chunk& rows) {
  shape[0] = rows.length;
  return shape;
}

}  // namespace

std::shared_ptr<models::Llama> hollow_llama(const models::LlamaConfig& config) {
  std::map<std::string, Tensor> weights;
  for (const auto& p : models::expected_llama_parameters(config))
    weights.emplace(p.name, shape_only(p.shape));
  return std::make_shared<models::Llama>(config, std::move(weights), "hollow_llama");
}

LlamaRows llama_initial_rows(const models::LlamaConfig& config, int rank, int ranks) {
  ZENITH_CHECK(ranks >= 1 && rank >= 0 && rank < ranks, "[zero] llama_initial_rows: rank ", rank,
               " of ", ranks);
  // Llama(config)'s initialisation: norms ones, biases zeros, the rest normal(0,
  // initializer_range) drawn in the constructor's order (expected_llama_parameters' order).
  auto it = config.extra.find("initializer_range");
  const double stddev = it == config.extra.end() ? 0.02 : std::strtod(it->second.c_str(), nullptr);
  auto& engine = default_generator().engine();
  LlamaRows out;
  for (const auto& p : models::expected_llama_parameters(config)) {
    const Chunk rows = chunk_of(p.shape[0], ranks, rank);
    const Shape shape = rows_shape(p.shape, rows);
    if (ends_with(p.name, "norm.weight")) {
      out.emplace(p.name, Tensor::ones(shape));
    } else if (ends_with(p.name, ".bias")) {
      out.emplace(p.name, Tensor::zeros(shape));
    } else {
      const uint64_t row_numel = uint64_t(shape_numel(p.shape) / p.shape[0]);
      Tensor w = Tensor::empty(shape);
      engine.discard(2 * row_numel * uint64_t(rows.offset));  // Box-Muller: 2 draws a value
      if (w.numel() > 0) nn::init::normal_(w, 0.0, stddev);
      engine.discard(2 * row_numel * uint64_t(p.shape[0] - rows.offset - rows.length));
      out.emplace(p.name, std::move(w));
    }
  }
  return out;
}

LlamaRows llama_pretrained_rows(const std::string& dir, int rank, int ranks, DType dtype) {
  ZENITH_CHECK(ranks >= 1 && rank >= 0 && rank < ranks, "[zero] llama_pretrained_rows: rank ", rank,
               " of ", ranks);
  const models::LlamaConfig config = models::load_llama_config(dir);
  const std::vector<io::TensorInfo> listing = io::list_hf_state(dir);
  models::check_llama_state(config, listing, dir);
  std::map<std::string, bool> wanted;
  for (const auto& p : models::expected_llama_parameters(config)) wanted[p.name] = true;
  LlamaRows out;
  for (io::TensorInfo info : listing) {
    if (!wanted.count(info.name)) continue;  // a tied lm_head or an old inv_freq buffer
    const int64_t rows = info.shape.empty() ? 1 : info.shape[0];
    const Chunk mine = chunk_of(rows, ranks, rank);
    const uint64_t row_bytes = info.nbytes / uint64_t(rows);
    info.offset += row_bytes * uint64_t(mine.offset);  // row-major: the rows are one range
    info.nbytes = row_bytes * uint64_t(mine.length);
    if (!info.shape.empty()) info.shape[0] = mine.length;
    Tensor w = mine.length > 0 ? io::read_tensor(info) : Tensor::empty(info.shape, info.dtype);
    out.emplace(info.name, w.dtype() == dtype ? w : w.to(dtype));
  }
  core::empty_allocator_cache();  // the file-dtype blocks go back to the system
  return out;
}

std::function<Tensor(size_t, Chunk)> llama_rows_of(const models::Llama& model, LlamaRows rows) {
  std::vector<std::string> names;
  const auto named = model.named_parameters();
  for (const Tensor& p : model.trainable_params()) {
    std::string found;
    for (const auto& [name, t] : named)
      if (&t.impl() == &p.impl()) found = name;
    ZENITH_CHECK(rows.count(found), "[zero] llama_rows_of: no rows for parameter '", found, "'");
    names.push_back(found);
  }
  auto held = std::make_shared<LlamaRows>(std::move(rows));
  return [held, names](size_t i, Chunk chunk) {
    ZENITH_CHECK(i < names.size(), "[zero] llama_rows_of: parameter ", i, " of ", names.size());
    auto it = held->find(names[i]);
    ZENITH_CHECK(it != held->end(), "[zero] llama_rows_of: rows of '", names[i],
                 "' already handed over");
    Tensor t = std::move(it->second);
    held->erase(it);
    ZENITH_CHECK(t.dim() > 0 && t.size(0) == chunk.length, "[zero] llama_rows_of: '", names[i],
                 "' has ", t.dim() > 0 ? t.size(0) : 0, " rows here, ZeRO expects ", chunk.length);
    return t;
  };
}

}  // namespace zenith::distributed
