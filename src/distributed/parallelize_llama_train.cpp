// ParallelLlama: a LLaMA training step over pipeline × data × tensor (see the header).
#include "distributed/parallelize_llama_train.h"

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

double ParallelLlama::forward_backward(const Tensor& input_ids, const Tensor& labels) {
  const PipelineStepStats stats = pipeline_->step(input_ids, labels);
  plan_.sync_gradients(*model_);
  Tensor loss = Tensor::from_vector(std::vector<float>{float(stats.loss)}, {1});
  if (mesh_.degree(MeshDim::data) > 1) {
    for (const Tensor& p : trainable_params())
      if (p.grad().defined()) comm::all_reduce(p.grad(), comm::ReduceOp::AVG, mesh_.data_group());
    comm::all_reduce(loss, comm::ReduceOp::AVG, mesh_.data_group());
  }
  return loss.item();
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

std::map<std::string, Tensor> ParallelLlama::full_state() const {
  NoGradGuard no_grad;
  const int stages = mesh_.degree(MeshDim::pipeline);
  const int64_t layers = model_->config().num_hidden_layers;
  std::map<std::string, Tensor> out;
  for (auto& [name, p] : model_->hf_state()) {
    const int owner = owner_stage(name, layers, stages);
    // Collectives carry float32: bf16/f16 weights go there and back exactly.
    Tensor whole;
    if (owner == mesh_.pipeline_rank()) {
      auto it = plan_.sharded.find(name);
      whole = it == plan_.sharded.end()
                  ? p.to(DType::f32).contiguous()
                  : all_gather_along(p.to(DType::f32).contiguous(), it->second, plan_.tp.group);
    }
    if (stages > 1) {
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
    }
    out.emplace(name, whole.to(p.dtype()));
  }
  return out;
}

io::LoraAdapter ParallelLlama::lora_adapter(const io::LoraConfig& config) const {
  ZENITH_CHECK(mesh_.degree(MeshDim::pipeline) == 1,
               "[model parallel] saving a LoRA adapter from pipeline stages is not supported yet");
  return tensor_parallel_lora_adapter(*model_, plan_, config);
}

}  // namespace zenith::distributed
