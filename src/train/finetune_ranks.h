// The data-parallel side of zenith finetune: which share of each step's examples this rank
// takes, and the sums over ranks that make N ranks of batch B train as one process with batch
// N*B (token-weighted: every rank's loss is weighted by its share of the step's learned labels,
// and the gradients are summed, not averaged).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "zenith/tensor.h"

namespace zenith::finetune {

class Ranks {
 public:
  // The job's ranks when communication::init() has run, else the single process.
  Ranks();
  int rank() const { return rank_; }
  int world() const { return world_; }
  // Rank 0 writes the outputs (adapters, checkpoints, metrics, logs).
  bool writes() const { return rank_ == 0; }

  // This rank's [begin, end) of a global micro-batch [first, first + world * batch) clipped at
  // n: rank r takes the r-th run of `batch` examples (empty when there are too few).
  std::pair<int64_t, int64_t> share(int64_t first, int64_t batch, int64_t n) const;
  // Each value summed over the ranks (one collective for all of them).
  std::vector<double> sum(std::vector<double> values) const;
  // Every gradient of `params` summed over the ranks, in one collective (a parameter without a
  // gradient on this rank contributes zeros).
  void sum_gradients(const std::vector<Tensor>& params) const;

 private:
  int rank_ = 0, world_ = 1;
};

}  // namespace zenith::finetune
