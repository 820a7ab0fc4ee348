// Pipeline parallelism for the LLaMA family: the decoder layers split into stages of whole
// layers along the mesh's pipeline dimension, a batch split into micro-batches that flow
// through the stages (activations forward with send_next/recv_prev, their gradients back with
// send_prev/recv_next), and two schedules:
//
//   gpipe    every micro-batch forward, then every one backward: m micro-batches' activations
//            alive at once on every stage
//   1f1b     (PipeDream-flush, Megatron's default) p - s - 1 forwards to fill the pipe, then one
//            forward and one backward in turn: at most p - s micro-batches alive on stage s
//
// Both idle a stage for (p - 1) of the m + p - 1 slots of a step (the bubble). Gradients
// accumulate as one process's on the whole batch would: each micro-batch's mean loss scaled by
// its learned labels over the step's (step's total_targets), or by 1/m (the same mean when the
// micro-batches hold as many learned labels).
//
//   auto mesh = distributed::DeviceMesh::create({.pipeline = 2});
//   distributed::LlamaPipeline pipe(*model, mesh, {.micro_batches = 8});
//   auto stats = pipe.step(ids, labels);   // forward + backward; grads on this stage's params
//   opt->step();                           // an optimizer over pipe.parameters()
//
// The stage keeps only its own layers' weights: the other stages' parameters are emptied (shape
// [0]); the embedding lives on the first stage, the final norm and output layer on the last (a
// tied embedding on both, its gradient summed over the two after each step, so that the same
// optimizer step keeps the copies equal). Combined with tensor parallelism (sequence parallel
// too): parallelize_llama first, pass its plan.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "distributed/mesh.h"
#include "distributed/parallelize_llama.h"
#include "zenith/llama.h"

namespace zenith::distributed {

enum class PipelineSchedule { gpipe, one_f_one_b };
const char* schedule_name(PipelineSchedule s);  // "gpipe", "1f1b"

struct PipelineOptions {
  int micro_batches = 1;
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
};

// What one step did on this stage.
struct PipelineStepStats {
  double loss = 0;  // the batch's mean loss (sent from the last stage to every stage)
  // Bytes of activations kept for backward, summed over the micro-batches alive at once: the
  // most during the step (each micro-batch's bytes are what its forward left allocated).
  int64_t peak_activation_bytes = 0;
  int max_in_flight = 0;       // micro-batches whose activations were alive at once, at most
  double compute_seconds = 0;  // forward and backward work, waits for peers excluded
  double step_seconds = 0;     // the whole step
  // The fraction of the step this stage spent waiting: 1 - compute / step.
  double bubble() const { return step_seconds > 0 ? 1.0 - compute_seconds / step_seconds : 0; }
};
// (p - 1) / (m + p - 1): the idle fraction of a stage with equal stages and free communication.
double ideal_bubble(int stages, int micro_batches);

// Layers [first, last) of `layers` that stage `stage` of `stages` runs: contiguous, sizes
// differing by at most one (the earlier stages get the extra ones).
std::pair<int64_t, int64_t> stage_layers(int64_t layers, int stages, int stage);

class LlamaPipeline {
 public:
  // Every rank of the mesh calls it with the same model (same config; weights as for one
  // process). Errors: more stages than layers.
  LlamaPipeline(models::Llama& model, DeviceMesh mesh, PipelineOptions options,
                const TensorParallelPlan* tensor_parallel = nullptr);

  // One forward and backward of the batch ids, labels [B, T] (B divisible by micro_batches);
  // every stage of the pipeline group calls it with the same batch. total_targets > 0: each
  // micro-batch's mean loss is weighted by its learned labels over total_targets (token-weighted,
  // as one process's mean over the labels of a step whose labels, over every data rank, number
  // total_targets; stats.loss is then this batch's share of that mean); 0: each by 1/m.
  PipelineStepStats step(const Tensor& input_ids, const Tensor& labels, int64_t total_targets = 0);

  // Forward only, without grad, of the batch ids, labels [B, T] as one micro-batch: its mean loss
  // over the learned labels, on every stage (evaluation). Every stage calls it with the batch.
  double eval_loss(const Tensor& input_ids, const Tensor& labels);

  int stage() const { return mesh_.pipeline_rank(); }
  int stages() const { return mesh_.degree(MeshDim::pipeline); }
  std::pair<int64_t, int64_t> layers() const { return layers_; }
  // The parameters this stage holds, by HF name.
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<Tensor> parameters() const;
  // The global gradient norm over every stage (each tensor shard and a tied embedding counted
  // once); max_norm > 0 also clips. Collective over the pipeline (and tensor) group; with
  // tensor parallelism, call the plan's sync_gradients first.
  double clip_grad_norm(double max_norm) const;

 private:
  struct MicroBatch;
  void forward(MicroBatch& mb, const Tensor& ids, const Tensor& labels, double weight);
  void backward(MicroBatch& mb);

  models::Llama& model_;
  DeviceMesh mesh_;
  PipelineOptions options_;
  const TensorParallelPlan* tp_;
  std::pair<int64_t, int64_t> layers_;
  Tensor inv_freq_;
  std::vector<std::string> names_;  // this stage's parameters
  std::vector<communication::Work> sends_;
  std::vector<Tensor> sent_;  // kept alive until their sends complete
  double compute_ = 0;
  bool tied_ = false;          // a tied embedding on the first and the last stage
  communication::Group ends_;  // this rank's first and last stage, when tied
};

}  // namespace zenith::distributed
