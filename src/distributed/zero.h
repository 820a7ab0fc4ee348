// ZeRO stages 1, 2 and 3 over a data-parallel group (DeepSpeed's ZeRO, PyTorch's FSDP2), with
// per-parameter shards: rank i of N holds rows chunk_of(rows, N, i) of every parameter (dim 0,
// torch.chunk's split, so the last shards are shorter or empty; the collectives pad them).
//
//   stage 1  optimizer states sharded: gradients reduce-scattered at step() (the full
//            gradients stay, holding the averaged values only in this rank's rows), each rank
//            updates its rows with its states, then the rows are all-gathered into the
//            parameters: DDP's traffic, 2(N-1)/N of the parameter bytes per step
//   stage 2  + gradients sharded: each gradient is reduce-scattered as soon as backward has
//            accumulated it and the full gradient is dropped
//   stage 3  + parameters sharded: a parameter holds no data outside its layer's forward and
//            backward; fully_shard(layer) gathers them for the forward, frees them after, and
//            gathers them again in backward, where it recomputes the layer's forward (as
//            activation checkpointing does) and reduce-scatters the gradients into the shards
//
//   auto zero = std::make_shared<ZeroOptimizer>(net->trainable_params(),
//       [](std::vector<Tensor> p) { return nn::AdamW(std::move(p), 1e-3); },
//       ZeroOptions{.stage = 3, .group = mesh.data_group()});
//   for (auto& layer : layers) layer = fully_shard(layer, zero);   // stage 3 only
//   loss.backward(); zero->clip_grad_norm(1.0); zero->step(); zero->zero_grad();
//
// Model-state bytes per rank with Ψ parameters in float32 and K bytes of optimizer state per
// parameter (AdamW 8, SGD with momentum 4): stage 1 8Ψ + KΨ/N, stage 2 4Ψ + (4+K)Ψ/N,
// stage 3 (8+K)Ψ/N (one process: (8+K)Ψ, the 16Ψ of AdamW). On one host this buys memory per
// rank, not speed.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "distributed/placement.h"
#include "zenith/autograd.h"
#include "zenith/communication.h"
#include "zenith/optim.h"

namespace zenith::distributed {

struct ZeroOptions {
  int stage = 1;                  // 1, 2 or 3
  communication::Group group{};   // the data-parallel group (DeviceMesh::data_group())
  bool broadcast_initial = true;  // copy the group's first rank's parameters to the others
  // How the ranks' gradients combine: AVG (DDP's: each rank's loss is a mean over its batch) or
  // SUM (zenith finetune's: each rank's loss is already weighted by its share of the tokens).
  communication::ReduceOp reduce = communication::ReduceOp::AVG;
  // Stage 2: reduce-scatter each gradient during backward (true: the full gradients never all
  // exist at once; every rank must then run the same backward passes), or at step() one
  // parameter after another, each full gradient dropped once reduced (false: for loops whose
  // ranks may run different numbers of backward passes, such as zenith finetune's).
  bool reduce_in_backward = true;
  // Stage 3 over parameters built without data (shape only, as hollow_llama builds them, so no
  // rank ever holds the whole model): this rank's rows of parameter `index`, [rows.length, ...]
  // in the parameter's dtype (an empty chunk: 0 rows). Nothing is broadcast then: each rank's
  // rows are its own. Unset: the rows are cut from the parameters' data.
  std::function<Tensor(size_t index, Chunk rows)> rows_of;
};

// For the gradient norm of a model that is also split over a tensor (model-parallel) group:
// which parameters are split over it (their squares add up over the group) and which are whole
// on every rank of it (counted once). Empty `split`: no tensor parallelism.
struct ModelParallelNorm {
  communication::Group group{};
  std::vector<bool> split;  // one per ZeRO parameter, in order
  // Pipeline stages: every stage's squares add up over this group (unset, the world: no stages).
  communication::Group pipeline{};
  // Empty: every parameter counted; false: a copy counted on another stage (the last stage's
  // tied embedding), left out.
  std::vector<bool> counted;
};

// Builds the inner optimizer over this rank's shards (called once, with the non-empty shards).
using OptimizerFactory = std::function<nn::OptimizerPtr(std::vector<Tensor> params)>;

// One parameter on this rank.
struct ZeroShard {
  Tensor param;            // the model's parameter (stage 3: no data outside gather/release)
  Shape global_shape;      // the parameter's shape
  Chunk rows;              // this rank's rows of dim 0
  int64_t chunk_rows = 0;  // rows of every rank's padded block: ceil(rows / N)
  int64_t row_numel = 1;   // elements per row
  Tensor shard;            // this rank's rows: a view of param (stages 1, 2) or owned (stage 3)
  Tensor grad;             // this rank's rows of the averaged gradient (undefined: none yet)
  bool gathered = true;    // stage 3: param holds its data now
};

// What this rank holds for the model state, in bytes.
struct ZeroMemory {
  uint64_t params = 0;
  uint64_t grads = 0;
  uint64_t optimizer_states = 0;
  uint64_t total() const { return params + grads + optimizer_states; }
};

class ZeroOptimizer {
 public:
  // Collective over options.group: every rank passes the same parameters (shapes and order).
  ZeroOptimizer(std::vector<Tensor> params, const OptimizerFactory& make, ZeroOptions options);
  ~ZeroOptimizer();
  ZeroOptimizer(const ZeroOptimizer&) = delete;
  ZeroOptimizer& operator=(const ZeroOptimizer&) = delete;

  // Reduce-scatters what backward left (stage 1), updates this rank's rows and, for stages 1 and 2,
  // all-gathers them into the parameters. Collective.
  void step();
  void zero_grad();
  // The norm of the averaged gradient over every parameter, each element counted once
  // (squares of this rank's rows, summed over the group). Collective.
  double grad_norm(const ModelParallelNorm& model_parallel = {});
  // Scales the gradient shards so that their global norm is at most max_norm; returns the norm
  // before clipping. Collective.
  double clip_grad_norm(double max_norm, const ModelParallelNorm& model_parallel = {});

  int stage() const { return options_.stage; }
  int group_rank() const { return rank_; }
  int group_size() const { return size_; }
  const communication::Group& group() const { return options_.group; }
  const std::vector<ZeroShard>& shards() const { return shards_; }
  nn::Optimizer& inner() { return *inner_; }
  const nn::OptimizerPtr& inner_ptr() const { return inner_; }
  const nn::Optimizer& inner() const { return *inner_; }
  // shards() index of each parameter of inner() (shards with no rows are not in it).
  const std::vector<size_t>& inner_index() const { return inner_index_; }
  // Index of `param` in shards(), or -1.
  int index_of(const Tensor& param) const;

  // Stage 3: gathers parameter i's rows from every rank into it / frees its data again.
  // Collective over the group. (Stages 1, 2: no-ops.)
  void gather(size_t i);
  void release(size_t i);
  // Stage 3 backward: adds parameter i's full local gradient, reduce-scattered, to its shard.
  void reduce_gradient(size_t i, const Tensor& full_grad);

  ZeroMemory model_state_bytes() const;

 private:
  void reduce_pending();  // what backward left in the parameters' .grad, once per step
  Tensor padded(const Tensor& flat, int64_t numel) const;

  ZeroOptions options_;
  int rank_ = 0, size_ = 1;
  std::vector<ZeroShard> shards_;
  nn::OptimizerPtr inner_;
  std::vector<size_t> inner_index_;  // shards_ index of each inner optimizer parameter
  std::vector<autograd::HookHandle> hooks_;
  bool reduced_ = false;  // gradients of this step already reduced by reduce_pending()
};

// Stage 3 around any computation y = fn(x) that uses the parameters `params` (indices into
// zero->shards()), such as a decoder layer's forward with its context bound in the lambda:
// gathers them, runs fn without grad and frees them; backward gathers them again, recomputes
// fn(x) with grad (fn must give the same y again: no dropout drawn anew), differentiates, and
// reduce-scatters their gradients into the shards. What fn captures stays alive until backward.
Tensor sharded_forward(const std::shared_ptr<ZeroOptimizer>& zero, std::vector<size_t> params,
                       std::function<Tensor(const Tensor&)> fn, const Tensor& x);
// The shards() indices of `layer`'s parameters; throws naming one that is not in `zero`.
std::vector<size_t> zero_indices(const ZeroOptimizer& zero, const nn::Cell& layer);

// Stage 3: `layer`'s parameters (all of them must be in `zero`) are gathered for its forward
// and freed after; backward gathers them again, recomputes the layer's forward with grad and
// reduce-scatters the parameters' gradients into the shards. Every rank of the group runs
// the same layers in the same order.
nn::CellPtr fully_shard(nn::CellPtr layer, std::shared_ptr<ZeroOptimizer> zero);

}  // namespace zenith::distributed
