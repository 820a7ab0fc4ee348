// One training step of a LLaMA over any mesh that fits the job: pipeline × data × tensor, with
// sequence parallelism inside the tensor groups: what a fine-tuning command calls.
//
//   communication::init();
//   auto model = models::Llama::from_pretrained(dir);    // every rank: the same checkpoint
//   models::add_lora(*model, lora);                      // optional, before
//   distributed::ParallelLlama run(model, {.tensor = 2, .pipeline = 2, .micro_batches = 4});
//   auto opt = nn::AdamW(run.trainable_params(), 1e-4);
//   for (...) {                                          // batch: this data rank's rows
//     double loss = run.forward_backward(ids, labels);   // the mean over the data ranks
//     run.clip_grad_norm(1.0);
//     opt->step();
//     opt->zero_grad();
//   }
//   auto state = run.full_state();                       // HF names, whole, on every rank
//
// Gradients end as one process's on the concatenation of the data ranks' batches (averaged over
// the data group, summed where tensor ranks hold partial sums); the data degree is what the
// world leaves after tensor × pipeline.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "distributed/mesh.h"
#include "distributed/parallelize_llama.h"
#include "distributed/pipeline.h"
#include "distributed/sharded_checkpoint.h"
#include "zenith/optim.h"

namespace zenith::distributed {

class ZeroOptimizer;

struct ModelParallelOptions {
  int tensor = 1;
  int pipeline = 1;
  int micro_batches = 1;  // pipeline micro-batches per step (the batch must divide by it)
  bool sequence_parallel = false;
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
  // false: forward_backward leaves the gradients unreduced over the data group (ZeRO's
  // reduce-scatter sums them at its step); the loss is still summed.
  bool data_gradients = true;
};

class ParallelLlama {
 public:
  // Collective over the world (communication::init() first): makes the mesh, rewrites `model`
  // for the tensor degree and splits it into stages. Errors name the degree that does not fit.
  ParallelLlama(std::shared_ptr<models::Llama> model, ModelParallelOptions options);
  ParallelLlama(const ParallelLlama&) = delete;  // the pipeline points at plan_
  ParallelLlama& operator=(const ParallelLlama&) = delete;

  // Forward and backward of this data rank's batch ids, labels [B, T]; returns the loss averaged
  // over the data ranks. Gradients are complete (synced) when it returns. total_targets > 0: the
  // learned labels of every data rank's batch together; the loss is then their mean, token-
  // weighted (one process's on the concatenated batches, whatever each micro-batch's padding).
  double forward_backward(const Tensor& input_ids, const Tensor& labels, int64_t total_targets = 0);
  // Forward only of this data rank's batch: its mean loss over the learned labels (every rank of
  // its tensor and pipeline groups gets it; no data-group sum).
  double eval_loss(const Tensor& input_ids, const Tensor& labels);
  // The global gradient norm (each parameter once over the mesh); max_norm > 0 also clips.
  double clip_grad_norm(double max_norm);
  // The parameters this rank holds and trains (its stage, its shards).
  std::vector<Tensor> trainable_params() const;
  // The whole model under HF's names (no adapters), gathered over tensor and pipeline groups
  // onto every rank: models::Llama(config, state, ...).save_pretrained on one rank.
  std::map<std::string, Tensor> full_state() const;
  // One tensor of full_state (`name` one of model().hf_state()'s), gathered onto every rank:
  // called for one name after another (every rank in the same order), no rank ever holds more
  // than one whole tensor. Collective.
  Tensor full_tensor(const std::string& name) const;
  // The LoRA adapter as one process would save it (gathered over tensor and pipeline groups
  // onto every rank).
  io::LoraAdapter lora_adapter(const io::LoraConfig& config) const;

  // The state of `optimizer` (built over trainable_params(), in order) as pieces of a sharded
  // checkpoint (sharded_checkpoint.h): "<name>.<slot>" with each tensor shard's global offsets,
  // "optimizer.step". Every rank's pieces together are the whole state (replicas listed once).
  std::vector<ShardedTensor> optimizer_pieces(const nn::Optimizer& optimizer) const;
  // This rank's blocks of those from a checkpoint, whatever tensor x pipeline x data layout
  // saved it, into `optimizer`. No communication.
  void load_optimizer(const ShardedCheckpointReader& reader, nn::Optimizer& optimizer) const;
  // The same for ZeRO over the data group (built over trainable_params(), stage 1 or 2): each
  // slot's rows of this rank's blocks, so that a checkpoint loads under any layout, with or
  // without ZeRO. Load: this rank's rows from such a checkpoint, no communication.
  std::vector<ShardedTensor> zero_optimizer_pieces(const ZeroOptimizer& zero) const;
  void load_zero_optimizer(const ShardedCheckpointReader& reader, ZeroOptimizer& zero) const;

  const DeviceMesh& mesh() const { return mesh_; }
  const TensorParallelPlan& plan() const { return plan_; }
  models::Llama& model() { return *model_; }

 private:
  Tensor from_stage(Tensor whole, int owner) const;
  // trainable_params()' names and their global shapes and offsets.
  std::vector<ShardedTensor> trainable_blocks() const;
  std::shared_ptr<models::Llama> model_;
  ModelParallelOptions options_;
  DeviceMesh mesh_;
  TensorParallelPlan plan_;
  std::optional<LlamaPipeline> pipeline_;
};

}  // namespace zenith::distributed
