// The small strategies beside Model's training step (model.cpp): which batches make one optimizer
// step (gradient accumulation), how a step's backward passes and loss are shared (one process,
// or every rank of DistributedDataParallel), and the check that stops on a non-finite loss.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "zenith/communication.h"
#include "zenith/ddp.h"
#include "zenith/train.h"

namespace zenith::train_detail {

// One batch of a dataset row: inputs and labels.
struct Batch {
  Tensor input;
  Tensor labels;
  int64_t samples() const { return input.dim() > 0 ? input.size(0) : 1; }
};
// A row's first two columns; fails on a row with fewer.
Batch to_batch(const dataset::Row& row);

// The batches of one optimizer step: gradient accumulation's micro-batches (one without it).
struct StepBatches {
  std::vector<Batch> batches;
  int64_t samples = 0;  // over all its batches
};

// Gradient accumulation: the next `batches_per_step` batches of `it` (fewer at the end of the
// epoch, none after it).
StepBatches next_step_batches(dataset::Iterator& it, int64_t batches_per_step);
// A micro-batch's loss scaled by 1 / (the step's batches), so that their gradients sum to the
// gradient of the combined batch.
Tensor accumulation_scaled(const Tensor& loss, size_t step_batches);

// A step's loss: the mean per sample over its micro-batches, filled in as they run forward.
class StepLoss {
 public:
  StepLoss(size_t batches, int64_t samples) : batches_(batches), samples_(samples) {}
  void add(double batch_loss, int64_t batch_samples) {
    last_ = batch_loss;
    sum_ += batch_loss * double(batch_samples);
  }
  double last_batch() const { return last_; }
  // Complete after the last micro-batch.
  double mean() const { return batches_ == 1 ? last_ : sum_ / double(samples_); }

 private:
  size_t batches_;
  int64_t samples_;
  double last_ = 0, sum_ = 0;
};

// Fails with "[train] loss is nan at epoch E, step S of N ..." naming the last good checkpoint;
// called before the step is applied, so no checkpoint is written after a bad step.
void check_finite_loss(double loss, const callbacks::RunContext& ctx);

// How a step's backward passes and its loss are shared. LocalSync: this process alone, each
// micro-batch's loss checked before its backward. DataParallelSync: every rank; only the step's
// last backward communicates (no_sync), and the step's loss is the mean over ranks, so that every
// rank checks the same value and a NaN on one rank stops all of them at the same step.
class StepSync {
 public:
  virtual ~StepSync() = default;
  // After each micro-batch's forward; `loss` is complete when `last`.
  virtual void after_forward(const StepLoss& loss, bool last) = 0;
  // Backward of one micro-batch's (scaled) loss.
  virtual void backward(const Tensor& loss, bool last) = 0;
  // After the step's last backward: the step's loss, checked to be finite.
  virtual double step_loss(const StepLoss& loss) = 0;
  // At the end of an epoch: the samples the whole job trained on, given this process's.
  virtual int64_t job_samples(int64_t local) { return local; }
  // At the end of an epoch: this rank's communication during it (data parallel only).
  virtual void record_communication(callbacks::EpochRecord& record,
                                    const callbacks::RunContext& epoch_start) {}
};

// DataParallelSync when `net` is a DistributedDataParallel cell, else LocalSync. The strategy
// reads (and under DDP updates the communication counters of) `ctx` for the run's duration.
std::unique_ptr<StepSync> make_step_sync(nn::Cell& net, callbacks::RunContext& ctx);

}  // namespace zenith::train_detail
