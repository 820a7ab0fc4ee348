// Data-parallel training across the ranks of a job, in the spirit of PyTorch's
// DistributedDataParallel:
//
//   communication::init();
//   auto net = nn::DistributedDataParallel(models::create("resnet18", 3, 32, 10));
//   auto opt = nn::Momentum(net->trainable_params(), 0.1, 0.9);
//   Model model(net, loss, opt);   // each rank feeds its own shard (dataset::DistributedSampler)
//
// At construction rank 0's parameters and buffers are broadcast to every rank. During backward
// the gradients are packed into buckets (at most bucket_cap_mb each, the one of the first layers
// at most last_bucket_cap_mb; numbered in reverse registration order, which is roughly the order
// backward produces gradients in); a bucket's all-reduce
// (average) starts asynchronously as soon as its last gradient is accumulated, so communication
// overlaps the rest of backward. backward() returns once every bucket is reduced and each
// parameter's .grad() holds the average over ranks: the optimizer step needs no change.
// Parameter and buffer names are those of the wrapped cell (no "module." prefix), so
// checkpoints load with or without the wrapper.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "zenith/autograd.h"
#include "zenith/communication.h"
#include "zenith/nn.h"

namespace zenith::nn {

struct DistributedDataParallelOptions {
  double bucket_cap_mb = 25;  // MiB of gradients per all-reduce
  // MiB cap of the bucket of the first layers, whose gradients backward produces last: what is
  // left to communicate after backward ends.
  double last_bucket_cap_mb = 1;
  bool broadcast_buffers = true;  // rank 0's buffers (BN statistics) before each training forward
  communication::Group group{};   // default: the world
};

// Counters since construction (or reset_stats()), for metrics and benchmarks.
struct DistributedDataParallelStats {
  int64_t steps = 0;  // backward passes synchronised
  int64_t buckets_reduced = 0;
  int64_t buckets_overlapped = 0;  // started during backward, before its last node ran
  uint64_t bytes_reduced = 0;      // gradient payload all-reduced by this rank
  double wait_seconds = 0;         // backward blocked at its end waiting for all-reduces
};

class DistributedDataParallelImpl : public Cell {
 public:
  DistributedDataParallelImpl(CellPtr module, DistributedDataParallelOptions options);
  ~DistributedDataParallelImpl() override;

  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "DistributedDataParallel"; }
  std::string extra_repr() const override;

  const CellPtr& module() const { return module_; }
  const communication::Group& group() const { return options_.group; }
  int rank() const;        // within the group
  int world_size() const;  // of the group
  // Bucket b's parameters, as indices into module()->trainable_params().
  const std::vector<std::vector<size_t>>& bucket_layout() const { return layout_; }
  // Copies rank 0's buffers to every rank (collective; every rank must call it).
  void sync_buffers();
  const DistributedDataParallelStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }

  // Gradient accumulation, as PyTorch's no_sync(): while the returned guard lives, backward
  // accumulates gradients locally and communicates nothing; the first backward after it
  // all-reduces the accumulated gradients.
  //   { auto guard = ddp->no_sync(); loss(a).backward(); }  loss(b).backward(); opt->step();
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallelImpl& ddp) : ddp_(&ddp), saved_(ddp.require_sync_) {
      ddp.require_sync_ = false;
    }
    ~NoSync() { ddp_->require_sync_ = saved_; }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallelImpl* ddp_;
    bool saved_;
  };
  [[nodiscard]] NoSync no_sync() { return NoSync(*this); }
  bool require_sync() const { return require_sync_; }

  struct Reducer;  // the per-backward bucket state (src/distributed/ddp.cpp)

 private:
  CellPtr module_;
  DistributedDataParallelOptions options_;
  std::vector<std::vector<size_t>> layout_;
  std::unique_ptr<Reducer> reducer_;
  DistributedDataParallelStats stats_;
  bool require_sync_ = true;  // false inside no_sync()
};

// Wraps `module` for data-parallel training over options.group; communication::init() must
// have been called. Collective: every rank of the group constructs it, with the same network.
std::shared_ptr<DistributedDataParallelImpl> DistributedDataParallel(
    CellPtr module, DistributedDataParallelOptions options = {});

}  // namespace zenith::nn
