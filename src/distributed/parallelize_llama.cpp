// parallelize_llama: a built models::Llama rewritten for tensor parallelism (see the header).
#include "distributed/parallelize_llama.h"

#include "models/llama_layers.h"
#include "zenith/autograd.h"
#include "zenith/ops.h"

namespace zenith::distributed {
namespace {

namespace comm = communication;
using models::detail::AttentionCell;
using models::detail::DecoderCell;
using models::detail::EmbeddingCell;

// Replaces a registered child in place (its position in the dotted names kept): the one edit
// parallelize_llama makes to a model's tree, done from outside as Cell::set_cell allows its
// subclasses.
struct CellEditor : nn::Cell {
  static void replace(nn::Cell& parent, const std::string& name, nn::CellPtr cell) {
    (parent.*&CellEditor::set_cell)(name, std::move(cell));
  }
};

template <typename C>
std::shared_ptr<C> child(const nn::Cell& parent, const std::string& name) {
  for (const auto& [n, c] : parent.named_children())
    if (n == name) return std::dynamic_pointer_cast<C>(c);
  return nullptr;
}

// The vocabulary-parallel embedding: EmbeddingCell's parameter name, this rank's rows.
class VocabParallelEmbedding : public EmbeddingCell {
 public:
  VocabParallelEmbedding(const Tensor& rows, int64_t vocab_start, TensorParallelGroup tp)
      : EmbeddingCell("model.embed_tokens", rows.size(0), rows.size(1),
                      [&](const std::string&, const Shape&) { return rows; }),
        vocab_start_(vocab_start),
        tp_(std::move(tp)) {}
  Tensor forward(const Tensor& ids) override {
    return vocab_parallel_embedding(weight(), ids, vocab_start_, tp_);
  }
  std::string type_name() const override { return "VocabParallelEmbedding"; }

 private:
  int64_t vocab_start_;
  TensorParallelGroup tp_;
};

// The new cell's base weight (and bias) keep the old one's requires_grad (a frozen base stays
// frozen); an adapter on the old one is split with it: `a_dim` / `b_dim` the dimension of A / B
// that is split (-1: replicated).
void adopt(nn::LoraLinear& cell, const nn::LoraLinear& full, const TensorParallelGroup& tp,
           int a_dim, int b_dim) {
  for (const char* name : {"weight", "bias"})
    for (auto& [n, p] : cell.named_parameters())
      if (n == name) Tensor(p).requires_grad_(full.weight().requires_grad());
  if (!full.has_adapter()) return;
  auto split = [&](const Tensor& t, int dim) {
    NoGradGuard no_grad;
    return dim < 0    ? t.clone()
           : dim == 0 ? shard_rows(t, tp.rank(), tp.size())
                      : shard_columns(t, tp.rank(), tp.size());
  };
  cell.set_adapter(full.adapter_spec(), split(full.lora_A(), a_dim), split(full.lora_B(), b_dim));
  Tensor(cell.lora_A()).requires_grad_(full.lora_A().requires_grad());
  Tensor(cell.lora_B()).requires_grad_(full.lora_B().requires_grad());
}

std::shared_ptr<ColumnParallelLinear> column(const nn::LoraLinear& full,
                                             const TensorParallelGroup& tp,
                                             const std::shared_ptr<SequenceGather>& gather) {
  auto c = std::make_shared<ColumnParallelLinear>(
      shard_rows(full.weight(), tp.rank(), tp.size()),
      full.bias().defined() ? shard_rows(full.bias(), tp.rank(), tp.size()) : Tensor(), tp, gather);
  adopt(*c, full, tp, -1, 0);  // A [r, in] whole, B [out, r] by rows
  return c;
}

std::shared_ptr<RowParallelLinear> row(const nn::LoraLinear& full, const TensorParallelGroup& tp,
                                       const std::shared_ptr<SequenceGather>& closes) {
  Tensor bias;
  if (full.bias().defined()) {
    NoGradGuard no_grad;
    bias = full.bias().clone();
  }
  auto r = std::make_shared<RowParallelLinear>(shard_columns(full.weight(), tp.rank(), tp.size()),
                                               bias, tp, closes);
  adopt(*r, full, tp, 1, -1);  // A [r, in] by columns, B [out, r] whole
  return r;
}

void check_divides(const char* what, int64_t value, int degree) {
  ZENITH_CHECK(value % degree == 0, "[tensor parallel] ", what, " ", value,
               " does not divide by the tensor-parallel degree ", degree);
}

}  // namespace

void check_tensor_parallel(const models::LlamaConfig& c, int degree) {
  ZENITH_CHECK(degree >= 1, "[tensor parallel] degree must be at least 1, got ", degree);
  check_divides("num_attention_heads", c.num_attention_heads, degree);
  check_divides("num_key_value_heads", c.num_key_value_heads, degree);
  check_divides("intermediate_size", c.intermediate_size, degree);
  check_divides("vocab_size", c.vocab_size, degree);
}

TensorParallelPlan parallelize_llama(models::Llama& model, TensorParallelGroup tp) {
  const models::LlamaConfig& config = model.config();
  const int n = tp.size(), r = tp.rank();
  check_tensor_parallel(config, n);
  for (const auto& [path, layer] : model.linear_layers())
    ZENITH_CHECK(path != "lm_head" || !layer->has_adapter(),
                 "[tensor parallel] a LoRA adapter on lm_head is not supported (the output layer "
                 "is vocabulary-parallel)");
  TensorParallelPlan plan;
  plan.tp = tp;
  auto decoder = child<DecoderCell>(model, "model");
  ZENITH_CHECK(decoder, "[tensor parallel] the model has no LlamaModel under 'model'");

  // Attention: a new cell with the local head counts, its projections sharded by head.
  models::LlamaConfig local = config;
  local.num_attention_heads /= n;
  local.num_key_value_heads /= n;
  local.intermediate_size /= n;
  for (auto& layer : decoder->layers) {
    const std::string prefix = "model.layers." + std::to_string(layer->index()) + ".";
    auto& old = *layer->self_attn;
    auto attn = std::make_shared<AttentionCell>(local, prefix + "self_attn.",
                                                [&](const std::string& name, const Shape& shape) {
                                                  return Tensor::zeros(shape);  // replaced below
                                                });
    auto qkv = std::make_shared<SequenceGather>(), gate_up = std::make_shared<SequenceGather>();
    attn->q_proj = column(*old.q_proj, tp, qkv);
    attn->k_proj = column(*old.k_proj, tp, qkv);
    attn->v_proj = column(*old.v_proj, tp, qkv);
    attn->o_proj = row(*old.o_proj, tp, qkv);
    CellEditor::replace(*attn, "q_proj", attn->q_proj);
    CellEditor::replace(*attn, "k_proj", attn->k_proj);
    CellEditor::replace(*attn, "v_proj", attn->v_proj);
    CellEditor::replace(*attn, "o_proj", attn->o_proj);
    layer->self_attn = attn;
    CellEditor::replace(*layer, "self_attn", attn);
    auto& mlp = *layer->mlp;
    mlp.gate_proj = column(*mlp.gate_proj, tp, gate_up);
    mlp.up_proj = column(*mlp.up_proj, tp, gate_up);
    mlp.down_proj = row(*mlp.down_proj, tp, gate_up);
    CellEditor::replace(mlp, "gate_proj", mlp.gate_proj);
    CellEditor::replace(mlp, "up_proj", mlp.up_proj);
    CellEditor::replace(mlp, "down_proj", mlp.down_proj);
    for (const char* p : {"self_attn.q_proj.", "self_attn.k_proj.", "self_attn.v_proj.",
                          "mlp.gate_proj.", "mlp.up_proj."}) {
      plan.sharded[prefix + p + "weight"] = 0;
      plan.sharded[prefix + p + "bias"] = 0;
    }
    plan.sharded[prefix + "self_attn.o_proj.weight"] = 1;
    plan.sharded[prefix + "mlp.down_proj.weight"] = 1;
    // Adapters split with their base: B of a column-parallel layer by rows, A of a row-parallel
    // one by columns; the other factor is replicated with a partial gradient on each rank.
    for (const char* p : {"self_attn.q_proj.", "self_attn.k_proj.", "self_attn.v_proj.",
                          "mlp.gate_proj.", "mlp.up_proj."}) {
      plan.sharded[prefix + p + "lora_B.weight"] = 0;
      plan.partial_gradients.insert(prefix + p + "lora_A.weight");
    }
    for (const char* p : {"self_attn.o_proj.", "mlp.down_proj."}) {
      plan.sharded[prefix + p + "lora_A.weight"] = 1;
      plan.partial_gradients.insert(prefix + p + "lora_B.weight");
    }
  }

  // Vocabulary rows: the embedding, and the output layer (itself when tied).
  plan.vocab_rows = config.vocab_size / n;
  plan.vocab_start = r * plan.vocab_rows;
  const Tensor& table = decoder->embed_tokens->weight();
  auto embedding =
      std::make_shared<VocabParallelEmbedding>(shard_rows(table, r, n), plan.vocab_start, tp);
  Tensor(embedding->weight()).requires_grad_(table.requires_grad());
  decoder->embed_tokens = embedding;
  CellEditor::replace(*decoder, "embed_tokens", embedding);
  plan.sharded["model.embed_tokens.weight"] = 0;
  if (auto head = child<nn::LoraLinear>(model, "lm_head")) {
    Tensor w = head->weight();
    replace_data(w, shard_rows(w, r, n));
    plan.sharded["lm_head.weight"] = 0;
  }
  // Drop the allocator's hold on nothing: the full tensors die with the old cells here.
  return plan;
}

std::vector<Tensor> TensorParallelPlan::sharded_parameters(const models::Llama& model) const {
  std::vector<Tensor> out;
  for (auto& [name, p] : model.named_parameters())
    if (sharded.count(name)) out.push_back(p);
  return out;
}

std::vector<Tensor> TensorParallelPlan::replicated_parameters(const models::Llama& model) const {
  std::vector<Tensor> out;
  for (auto& [name, p] : model.named_parameters())
    if (!sharded.count(name)) out.push_back(p);
  return out;
}

Tensor TensorParallelPlan::shard_of(const std::string& name, const Tensor& full) const {
  auto it = sharded.find(name);
  if (it == sharded.end()) return full;
  return it->second == 0 ? shard_rows(full, rank(), degree())
                         : shard_columns(full, rank(), degree());
}

double TensorParallelPlan::clip_grad_norm(const models::Llama& model, double max_norm) const {
  return clip_grad_norm_tensor_parallel(sharded_parameters(model), replicated_parameters(model),
                                        max_norm, tp.group);
}

void TensorParallelPlan::sync_gradients(const models::Llama& model) const {
  if (degree() == 1) return;
  for (auto& [name, p] : model.named_parameters()) {
    if (sharded.count(name) || !p.grad().defined()) continue;
    if (tp.sequence_parallel || partial_gradients.count(name))
      comm::all_reduce(p.grad(), comm::ReduceOp::SUM, tp.group);
  }
}

std::map<std::string, Tensor> tensor_parallel_full_state(const models::Llama& model,
                                                         const TensorParallelPlan& plan) {
  std::map<std::string, Tensor> out;
  for (auto& [name, p] : model.hf_state()) {
    auto it = plan.sharded.find(name);
    // Collectives carry float32: bf16/f16 weights go there and back exactly.
    out.emplace(name, it == plan.sharded.end() ? p
                                               : all_gather_along(p.to(DType::f32).contiguous(),
                                                                  it->second, plan.tp.group)
                                                     .to(p.dtype()));
  }
  return out;
}

io::LoraAdapter tensor_parallel_lora_adapter(const models::Llama& model,
                                             const TensorParallelPlan& plan,
                                             const io::LoraConfig& config) {
  io::LoraAdapter adapter = models::lora_adapter(model, config);
  for (auto& [path, w] : adapter.modules) {
    auto it = plan.sharded.find(path + ".lora_B.weight");
    if (it != plan.sharded.end()) w.B = all_gather_along(w.B.contiguous(), 0, plan.tp.group);
    it = plan.sharded.find(path + ".lora_A.weight");
    if (it != plan.sharded.end()) w.A = all_gather_along(w.A.contiguous(), 1, plan.tp.group);
  }
  return adapter;
}

Tensor tensor_parallel_lm_loss(models::Llama& model, const TensorParallelPlan& plan,
                               const models::LlamaInput& input, const Tensor& labels) {
  const Tensor& ids = input.input_ids;
  ZENITH_CHECK(labels.defined() && labels.shape() == ids.shape(), "[tensor parallel] labels ",
               labels.defined() ? shape_str(labels.shape()) : "none",
               " must have input_ids' shape ", shape_str(ids.shape()));
  return tensor_parallel_head_loss(model, plan, model.hidden_states(input), labels);
}

Tensor tensor_parallel_head_loss(const models::Llama& model, const TensorParallelPlan& plan,
                                 const Tensor& hidden_states, const Tensor& labels) {
  Tensor hidden = plan.tp.sequence_parallel ? gather_sequence(hidden_states, 1, plan.tp.group)
                                            : copy_to_tensor_parallel(hidden_states, plan.tp.group);
  const Tensor weight = model.head_parameters().front();
  Tensor logits = ops::linear(hidden, weight);  // [B, T, V / n]
  const int64_t b = labels.size(0), t = labels.size(1);
  const std::vector<int64_t> l = labels.to_int_vector();
  std::vector<int64_t> targets(size_t(b * t), -100);
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j + 1 < t; ++j) targets[size_t(i * t + j)] = l[size_t(i * t + j + 1)];
  return vocab_parallel_cross_entropy(logits.reshape({b * t, logits.size(2)}), targets,
                                      plan.vocab_start, plan.tp.group);
}

}  // namespace zenith::distributed
