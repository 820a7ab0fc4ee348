// The strategies beside Model's training step: gradient accumulation, the NaN check, and how a
// step is shared by one process (LocalSync) or by the ranks of DDP (DataParallelSync).
#include "train/train_step.h"

#include <cmath>
#include <string>

#include "core/trace_range.h"

namespace zenith::train_detail {

Batch to_batch(const dataset::Row& row) {
  ZENITH_CHECK(row.size() >= 2, "[Model] dataset rows need (input, label) columns, got ",
               row.size(), " column(s)");
  return {row[0], row[1]};
}

StepBatches next_step_batches(dataset::Iterator& it, int64_t batches_per_step) {
  StepBatches step;
  while (int64_t(step.batches.size()) < batches_per_step) {
    auto row = it.next();
    if (!row) break;
    step.batches.push_back(to_batch(*row));
    step.samples += step.batches.back().samples();
  }
  return step;
}

Tensor accumulation_scaled(const Tensor& loss, size_t step_batches) {
  return step_batches > 1 ? loss * (1.0 / double(step_batches)) : loss;
}

void check_finite_loss(double loss, const callbacks::RunContext& ctx) {
  if (std::isfinite(loss)) return;
  ZENITH_FAIL("[train] loss is ", loss, " at epoch ", ctx.epoch, ", step ", ctx.step_in_epoch,
              " of ", ctx.steps_per_epoch, " (global step ", ctx.step + 1,
              "); stopped before applying this step (lower the learning rate or check the "
              "data). ",
              ctx.last_checkpoint.empty() ? std::string("No checkpoint was written in this run.")
                                          : "The last good checkpoint is " + ctx.last_checkpoint);
}

namespace {

// One process: each micro-batch's loss is checked before its backward.
class LocalSync : public StepSync {
 public:
  explicit LocalSync(const callbacks::RunContext& ctx) : ctx_(ctx) {}
  void after_forward(const StepLoss& loss, bool) override {
    check_finite_loss(loss.last_batch(), ctx_);
  }
  void backward(const Tensor& loss, bool) override { loss.backward(); }
  double step_loss(const StepLoss& loss) override { return loss.mean(); }

 private:
  const callbacks::RunContext& ctx_;
};

// Every rank of a DistributedDataParallel cell: the non-final micro-batches' backward stays
// local (no_sync); the step's loss is averaged over ranks while the last backward runs.
class DataParallelSync : public StepSync {
 public:
  DataParallelSync(nn::DistributedDataParallelImpl& ddp, callbacks::RunContext& ctx)
      : ddp_(ddp),
        ctx_(ctx),
        comm_at_start_(communication::stats()),
        wait_at_start_(ddp.stats().wait_seconds) {}

  void after_forward(const StepLoss& loss, bool last) override {
    if (!last) return;
    global_loss_ = Tensor::from_vector(std::vector<double>{loss.mean()}, {1});
    loss_work_ =
        communication::all_reduce_async(global_loss_, communication::ReduceOp::AVG, ddp_.group());
  }

  void backward(const Tensor& loss, bool last) override {
    if (last) return loss.backward();
    auto local = ddp_.no_sync();
    loss.backward();
  }

  double step_loss(const StepLoss&) override {
    {
      core::TraceRange range(core::Range::communication_wait);
      loss_work_.wait();
    }
    const double value = global_loss_.item();
    check_finite_loss(value, ctx_);
    count_communication();
    return value;
  }

  int64_t job_samples(int64_t local) override {
    Tensor n = Tensor::from_vector(std::vector<double>{double(local)}, {1});
    communication::all_reduce(n, communication::ReduceOp::SUM, ddp_.group());
    return int64_t(n.item());
  }

  void record_communication(callbacks::EpochRecord& record,
                            const callbacks::RunContext& epoch_start) override {
    record.comm_bytes = ctx_.comm_bytes - epoch_start.comm_bytes;
    record.comm_seconds = ctx_.comm_seconds - epoch_start.comm_seconds;
    record.comm_wait_seconds = ctx_.comm_wait_seconds - epoch_start.comm_wait_seconds;
  }

 private:
  // Communication totals since the run began, for the scalar loggers and the epoch record.
  void count_communication() {
    auto now = communication::stats();
    ctx_.comm_bytes = int64_t(now.bytes_sent + now.bytes_received) -
                      int64_t(comm_at_start_.bytes_sent + comm_at_start_.bytes_received);
    ctx_.comm_seconds = now.seconds - comm_at_start_.seconds;
    ctx_.comm_wait_seconds = ddp_.stats().wait_seconds - wait_at_start_;
  }

  nn::DistributedDataParallelImpl& ddp_;
  callbacks::RunContext& ctx_;
  const communication::Stats comm_at_start_;
  const double wait_at_start_;
  Tensor global_loss_;  // of the step in progress
  communication::Work loss_work_;
};

}  // namespace

std::unique_ptr<StepSync> make_step_sync(nn::Cell& net, callbacks::RunContext& ctx) {
  if (auto* ddp = dynamic_cast<nn::DistributedDataParallelImpl*>(&net))
    return std::make_unique<DataParallelSync>(*ddp, ctx);
  return std::make_unique<LocalSync>(ctx);
}

}  // namespace zenith::train_detail
