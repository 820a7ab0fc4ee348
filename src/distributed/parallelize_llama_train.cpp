// ParallelLlama: a LLaMA training step over pipeline × data × tensor (see the header).
#include "distributed/parallelize_llama_train.h"

#include "distributed/zero.h"
#include "distributed/zero_checkpoint.h"
#include "zenith/autograd.h"

namespace zenith::distributed {
namespace {

namespace comm = communication;

// The stage that holds parameter `name` (HF's names) of a model with `layers` decoder layers.
int owner_stage(const std::string& name, int64_t layers, int stages) {
  const std::string prefix = "model.layers.";
  if (name.rfind(prefix, 0) == 0) {
    const int64_t layer = std::stoll(name.substr(prefix.size()));
    for (int s = 0; s < stages; ++s)
      if (layer < stage_layers(layers, stages, s).second) return s;
  }
  return name.rfind("model.embed_tokens.", 0) == 0 ? 0 : stages - 1;
}

}  // namespace

ParallelLlama::ParallelLlama(std::shared_ptr<models::Llama> model, ModelParallelOptions options)
    : model_(std::move(model)), options_(options) {
  ZENITH_CHECK(model_, "[model parallel] no model");
  ZENITH_CHECK(comm::is_initialized(), "[model parallel] communication::init() first");
  mesh_ = DeviceMesh::create({.pipeline = options_.pipeline, .data = 0, .tensor = options_.tensor});
  TensorParallelGroup tp;
  tp.group = mesh_.tensor_group();
  tp.sequence_parallel = options_.sequence_parallel;
  plan_ = parallelize_llama(*model_, tp);
  pipeline_.emplace(*model_, mesh_, PipelineOptions{options_.micro_batches, options_.schedule},
                    &plan_);
}

double ParallelLlama::forward_backward(const Tensor& input_ids, const Tensor& labels,
                                       int64_t total_targets) {
  const PipelineStepStats stats = pipeline_->step(input_ids, labels, total_targets);
  plan_.sync_gradients(*model_);
  Tensor loss = Tensor::from_vector(std::vector<double>{stats.loss}, {1});
  // Token-weighted: each rank's loss and gradients are already its share of the mean.
  const comm::ReduceOp op = total_targets > 0 ? comm::ReduceOp::SUM : comm::ReduceOp::AVG;
  if (mesh_.degree(MeshDim::data) > 1) {
    if (options_.data_gradients)
      for (const Tensor& p : trainable_params())
        if (p.grad().defined()) comm::all_reduce(p.grad(), op, mesh_.data_group());
    comm::all_reduce(loss, op, mesh_.data_group());
  }
  return loss.item();
}

double ParallelLlama::eval_loss(const Tensor& input_ids, const Tensor& labels) {
  const bool was_training = model_->training();
  model_->eval();
  const double loss = pipeline_->eval_loss(input_ids, labels);
  model_->train(was_training);
  return loss;
}

double ParallelLlama::clip_grad_norm(double max_norm) {
  return pipeline_->clip_grad_norm(max_norm);
}

std::vector<Tensor> ParallelLlama::trainable_params() const {
  std::vector<Tensor> out;
  for (const Tensor& p : pipeline_->parameters())
    if (p.requires_grad()) out.push_back(p);
  return out;
}

// `whole` (defined on the stage that owns it, in float32) on every stage of the pipeline group.
Tensor ParallelLlama::from_stage(Tensor whole, int owner) const {
  if (mesh_.degree(MeshDim::pipeline) == 1) return whole;
  MeshCoord root = mesh_.coord();
  root.pipeline = owner;
  const int root_rank = mesh_.layout().rank_of(root);
  Tensor shape = Tensor::zeros({2}, DType::i64);
  if (whole.defined())
    shape = Tensor::from_vector(
        std::vector<int64_t>{whole.size(0), whole.dim() > 1 ? whole.size(1) : -1}, {2});
  comm::broadcast(shape, root_rank, mesh_.pipeline_group());
  const std::vector<int64_t> dims = shape.to_int_vector();
  if (!whole.defined())
    whole = Tensor::empty(dims[1] < 0 ? Shape{dims[0]} : Shape{dims[0], dims[1]});
  comm::broadcast(whole, root_rank, mesh_.pipeline_group());
  return whole;
}

std::map<std::string, Tensor> ParallelLlama::full_state() const {
  std::map<std::string, Tensor> out;
  for (const auto& [name, p] : model_->hf_state()) out.emplace(name, full_tensor(name));
  return out;
}

Tensor ParallelLlama::full_tensor(const std::string& name) const {
  NoGradGuard no_grad;
  const Tensor p = model_->hf_state().at(name);
  const int owner =
      owner_stage(name, model_->config().num_hidden_layers, mesh_.degree(MeshDim::pipeline));
  // Collectives carry float32: bf16/f16 weights go there and back exactly.
  Tensor whole;
  if (owner == mesh_.pipeline_rank()) {
    auto it = plan_.sharded.find(name);
    whole = it == plan_.sharded.end()
                ? p.to(DType::f32).contiguous()
                : all_gather_along(p.to(DType::f32).contiguous(), it->second, plan_.tp.group);
  }
  return from_stage(whole, owner).to(p.dtype());
}

io::LoraAdapter ParallelLlama::lora_adapter(const io::LoraConfig& config) const {
  NoGradGuard no_grad;
  const int stages = mesh_.degree(MeshDim::pipeline);
  if (stages == 1) return tensor_parallel_lora_adapter(*model_, plan_, config);
  // Each layer's factors from the stage that holds it (the others hold them empty), gathered
  // over its tensor group there.
  io::LoraAdapter adapter = models::lora_adapter(*model_, config);
  for (auto& [path, w] : adapter.modules) {
    const int owner =
        owner_stage(path + ".lora_A.weight", model_->config().num_hidden_layers, stages);
    Tensor a, b;
    if (owner == mesh_.pipeline_rank()) {
      a = w.A.to(DType::f32).contiguous();
      b = w.B.to(DType::f32).contiguous();
      if (plan_.sharded.count(path + ".lora_A.weight")) a = all_gather_along(a, 1, plan_.tp.group);
      if (plan_.sharded.count(path + ".lora_B.weight")) b = all_gather_along(b, 0, plan_.tp.group);
    }
    w.A = from_stage(a, owner).to(w.A.dtype());
    w.B = from_stage(b, owner).to(w.B.dtype());
  }
  return adapter;
}

std::vector<ShardedTensor> ParallelLlama::trainable_blocks() const {
  std::vector<ShardedTensor> out;
  for (const auto& [name, p] : pipeline_->named_parameters()) {
    if (!p.requires_grad()) continue;
    ShardedTensor t{
        .name = name, .global_shape = p.shape(), .offset = Shape(p.dim(), 0), .local = p};
    auto it = plan_.sharded.find(name);
    if (it != plan_.sharded.end()) {
      const size_t d = size_t(it->second);
      t.offset[d] = p.shape()[d] * plan_.rank();
      t.global_shape[d] = p.shape()[d] * plan_.degree();
    }
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<ShardedTensor> ParallelLlama::optimizer_pieces(const nn::Optimizer& optimizer) const {
  const std::vector<ShardedTensor> blocks = trainable_blocks();
  std::vector<ShardedTensor> out;
  for (const auto& [key, t] : optimizer.state_dict()) {
    std::string slot;
    size_t i = 0;
    if (key == "step") {
      out.push_back({"optimizer.step", {1}, {0}, t.reshape({1})});
    } else if (split_slot(key, &slot, &i)) {
      ZENITH_CHECK(i < blocks.size(), "[model parallel] optimizer state '", key, "' of ",
                   blocks.size(), " parameters");
      const ShardedTensor& b = blocks[i];
      out.push_back({b.name + "." + slot, b.global_shape, b.offset, t.reshape(b.local.shape())});
    }
  }
  return out;
}

void ParallelLlama::load_optimizer(const ShardedCheckpointReader& reader,
                                   nn::Optimizer& optimizer) const {
  const std::vector<ShardedTensor> blocks = trainable_blocks();
  nn::StateDict state;
  for (const auto& [key, t] : optimizer.state_dict()) {
    std::string slot;
    size_t i = 0;
    if (key == "step") {
      state[key] = reader.read_full("optimizer.step").reshape(t.shape());
    } else if (split_slot(key, &slot, &i)) {
      const ShardedTensor& b = blocks.at(i);
      const std::string name = b.name + "." + slot;
      ZENITH_CHECK(reader.contains(name) && reader.global_shape(name) == b.global_shape,
                   "[model parallel] the checkpoint has no optimizer state '", name, "' of shape ",
                   shape_str(b.global_shape));
      state[key] = reader.read(name, {b.local.shape(), b.offset}).reshape(t.shape());
    }
  }
  optimizer.load_state_dict(state);
}

// ZeRO's shard i: rows [rows.offset, +rows.length) of this rank's block i, on dim 0.
static ShardedTensor zero_block(ShardedTensor block, const ZeroShard& s) {
  ZENITH_CHECK(!block.offset.empty(), "[model parallel] ZeRO's '", block.name, "' is a scalar");
  block.offset[0] += s.rows.offset;
  return block;
}

std::vector<ShardedTensor> ParallelLlama::zero_optimizer_pieces(const ZeroOptimizer& zero) const {
  const std::vector<ShardedTensor> blocks = trainable_blocks();
  return distributed::zero_optimizer_pieces(
      zero, [&](size_t i) { return zero_block(blocks.at(i), zero.shards().at(i)); });
}

void ParallelLlama::load_zero_optimizer(const ShardedCheckpointReader& reader,
                                        ZeroOptimizer& zero) const {
  const std::vector<ShardedTensor> blocks = trainable_blocks();
  nn::StateDict state;
  for (const auto& [key, t] : zero.inner().state_dict()) {
    std::string slot;
    size_t j = 0;
    if (key == "step") {
      state[key] = reader.read_full("optimizer.step").reshape(t.shape());
    } else if (split_slot(key, &slot, &j)) {
      const size_t i = zero.inner_index().at(j);
      const ZeroShard& s = zero.shards().at(i);
      ShardedTensor b = zero_block(blocks.at(i), s);
      b.name += "." + slot;
      ZENITH_CHECK(reader.contains(b.name) && reader.global_shape(b.name) == b.global_shape,
                   "[model parallel] the checkpoint has no optimizer state '", b.name,
                   "' of shape ", shape_str(b.global_shape));
      state[key] = reader.read(b.name, {s.shard.shape(), b.offset}).reshape(t.shape());
    }
  }
  zero.inner().load_state_dict(state);
}

}  // namespace zenith::distributed
