// The data-parallel ranks of a training run, one abstraction for `zenith train` (whose
// DistributedDataParallel cell shards the data by rank) and `zenith finetune` (which splits each
// micro-batch among the ranks): which rank this process is, which one writes the outputs, and
// the sums over ranks that make N ranks of batch B train as one process with batch N*B.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "zenith/communication.h"
#include "zenith/tensor.h"

namespace zenith {

class Ranks {
 public:
  // The job's ranks when communication::init() has run, else the single process.
  Ranks();
  // The ranks of `group` (a mesh's data group under model parallelism); rank 0 of the group
  // writes only when `writes` (the world's rank 0 is in it).
  Ranks(communication::Group group, bool writes);
  int rank() const { return rank_; }
  int world() const { return world_; }
  // Rank 0 writes the outputs (checkpoints, adapters, metrics, logs).
  bool writes() const { return writes_; }

  // This rank's [begin, end) of a global micro-batch [first, first + world * batch) clipped at
  // n: rank r takes the r-th run of `batch` examples (empty when there are too few).
  std::pair<int64_t, int64_t> share(int64_t first, int64_t batch, int64_t n) const;
  // Each value summed over the ranks (one collective for all of them).
  std::vector<double> sum(std::vector<double> values) const;
  // Every gradient of `params` summed over the ranks in `dtype`, in one collective (a parameter
  // without a gradient on this rank contributes zeros), and left in the parameter's dtype:
  // float64 gradients (Float64Gradients; every rank passes float64, whether it had examples or
  // not) are rounded to float32 once, here.
  void sum_gradients(const std::vector<Tensor>& params, DType dtype = DType::f32) const;

 private:
  int rank_ = 0, world_ = 1;
  bool writes_ = true;
  communication::Group group_;
};

}  // namespace zenith
