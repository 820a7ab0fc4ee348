// Model.train / eval / predict with metrics and callbacks, named as in MindSpore:
//   Model model(net, loss, opt, {{"Accuracy", metrics::Accuracy()}});
//   model.train(10, ds, {callbacks::LossMonitor(), callbacks::ModelCheckpoint("ckpt")});
//   auto result = model.eval(ds);  // {"Accuracy": 0.871, "Loss": 0.36}
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "zenith/data.h"
#include "zenith/graph.h"
#include "zenith/io.h"
#include "zenith/nn.h"
#include "zenith/optim.h"

namespace zenith {

class Model;

namespace metrics {

// Accumulates over batches: clear(), update() per batch, eval() at the end.
class Metric {
 public:
  virtual ~Metric() = default;
  virtual void clear() = 0;
  // outputs: logits [N, C]; labels: class indices [N]; loss: the batch's mean loss (NaN
  // when the model has no loss function).
  virtual void update(const Tensor& outputs, const Tensor& labels, double loss) = 0;
  virtual double eval() const = 0;
};
using MetricPtr = std::shared_ptr<Metric>;

MetricPtr Accuracy();
MetricPtr TopKCategoricalAccuracy(int64_t k);
MetricPtr Loss();  // mean loss per sample

// rows: true class, columns: predicted class. eval() is the accuracy (trace / total).
class ConfusionMatrix : public Metric {
 public:
  explicit ConfusionMatrix(int64_t num_classes);
  void clear() override;
  void update(const Tensor& outputs, const Tensor& labels, double loss) override;
  double eval() const override;
  const std::vector<std::vector<int64_t>>& matrix() const { return counts_; }

 private:
  std::vector<std::vector<int64_t>> counts_;
};

// Predicted classes (argmax over dim 1) of logits [N, C], and labels as int64.
std::vector<int64_t> predicted_classes(const Tensor& outputs);
std::vector<int64_t> label_values(const Tensor& labels);

}  // namespace metrics

namespace callbacks {

// One epoch of the run's history.
struct EpochRecord {
  int64_t epoch = 0;  // 1-based
  double loss = 0;    // mean training loss per sample
  double seconds = 0;
  double images_per_second = 0;
  double data_wait_seconds = 0;        // time the model waited for the input pipeline
  double learning_rate = 0;            // at the end of the epoch
  std::map<std::string, double> eval;  // validation metrics, when evaluated this epoch
  // Data parallel (DistributedDataParallel): this rank's communication in the epoch.
  int64_t comm_bytes = 0;        // sent + received
  double comm_seconds = 0;       // collectives' time on the communication threads
  double comm_wait_seconds = 0;  // backward blocked waiting for gradient all-reduces
};

// What callbacks see (MindSpore's RunContext / cb_params).
struct RunContext {
  Model* model = nullptr;
  int64_t epoch = 0;          // current epoch, 1-based
  int64_t epochs = 0;         // last epoch of this run
  int64_t initial_epoch = 0;  // epochs done before this run (resume)
  int64_t step = 0;           // global step count, across epochs, 1-based once stepping
  int64_t step_in_epoch = 0;  // 1-based
  int64_t steps_per_epoch = 0;
  int64_t total_steps = 0;                     // the run's last step; 0: epochs x steps_per_epoch
  int64_t batch_size = 0;                      // of the current step (finetune: its tokens)
  double loss = 0;                             // of the current step
  double learning_rate = 0;                    // used by the current step
  double step_seconds = 0;                     // wall time of the current step, data wait included
  EpochRecord epoch_record;                    // filled at the end of each epoch
  std::map<std::string, double> eval_results;  // the latest validation
  std::string last_checkpoint;                 // written by ModelCheckpoint
  // Data parallel: this rank's communication since the run began (0 without DDP).
  int64_t comm_bytes = 0;
  double comm_seconds = 0;
  double comm_wait_seconds = 0;
  // Asks the run to stop after the current step (EarlyStopping, a user's callback).
  void request_stop(const std::string& reason) {
    stop_requested = true;
    stop_reason = reason;
  }
  bool stop_requested = false;
  std::string stop_reason;
  // Figures the current step produced once (a graph capture's op counts and memory), which the
  // scalar loggers write with the step.
  std::map<std::string, double> step_scalars;
};

class Callback {
 public:
  virtual ~Callback() = default;
  virtual void on_train_begin(RunContext&) {}
  virtual void on_train_epoch_begin(RunContext&) {}
  virtual void on_train_step_begin(RunContext&) {}
  virtual void on_train_step_end(RunContext&) {}
  virtual void on_train_epoch_end(RunContext&) {}
  virtual void on_train_end(RunContext&) {}
  virtual void on_eval_end(RunContext&) {}  // after fit()'s validation, eval_results set
};
using CallbackPtr = std::shared_ptr<Callback>;

// Prints "epoch: 1 step: 100, loss is 0.532" every per_print_times steps, and the epoch mean.
CallbackPtr LossMonitor(int64_t per_print_times = 1);
// Prints epoch time, per-step time and images/s at the end of each epoch.
CallbackPtr TimeMonitor();

struct CheckpointConfig {
  int64_t save_checkpoint_epochs = 1;  // 0: not by epoch
  int64_t save_checkpoint_steps = 0;   // 0: not by step
  int64_t keep_checkpoint_max = 0;     // 0: keep all; else delete the oldest written by this run
  std::string prefix = "checkpoint";   // <prefix>_epoch_<N>.safetensors, <prefix>_step_<S>...
};
// Atomic safetensors checkpoints of the model, optimizer, RNG and run position.
CallbackPtr ModelCheckpoint(const std::string& directory, CheckpointConfig config = {});

// TensorBoard scalars in `summary_dir`: loss (every collect_freq steps), learning_rate,
// epoch_loss, epoch_time, images_per_second, and the validation metrics (eval/<name>); under
// data parallelism also comm_bytes, comm_time_s, comm_bytes_per_second and comm_wait_fraction
// (this rank's communication since the previous logged step).
CallbackPtr SummaryCollector(const std::string& summary_dir, int64_t collect_freq = 10);
// One JSON object per logged scalar, flushed as written:
// {"step":..,"epoch":..,"name":"loss","value":..,"time":..}.
CallbackPtr MetricsLogger(const std::string& path, int64_t collect_freq = 10);

// Stops when `monitor` ("eval_loss", "loss", or a validation metric such as "Accuracy") has
// not improved by min_delta for `patience` epochs. mode "auto": max for accuracies, else min.
CallbackPtr EarlyStopping(const std::string& monitor = "eval_loss", int64_t patience = 3,
                          double min_delta = 0.0, const std::string& mode = "auto");

// The profiler over `steps` optimizer steps after `skip_steps` warm-up steps (the first step
// creates the oneDNN primitives and fills the allocator cache). When they end it writes
// DIR/trace.json (Chrome trace: Perfetto opens it), DIR/summary.json and DIR/summary.txt, and
// prints the summary table at the end of the run. Several ranks (world > 1): each rank records
// its own (DIR/trace.rank<R>.json, ...) and, after a barrier, rank 0 merges them into
// DIR/trace.json (one process per rank) and DIR/summary.json (rank 0's, plus every rank's
// phases).
struct ProfileOptions {
  std::string dir;
  int64_t steps = 10;
  int64_t skip_steps = 1;
  std::vector<std::string> copy_to;  // more directories that get the merged files (rank 0)
  int rank = 0;
  int world = 1;
  bool print = true;  // the table on stdout at the end of the run (rank 0)
};
CallbackPtr Profile(ProfileOptions options);

}  // namespace callbacks

namespace train_detail {  // the training step's strategies (src/train/train_step.h)
struct Batch;
struct StepBatches;
class StepSync;
}  // namespace train_detail

class Model {
 public:
  Model(nn::CellPtr network, nn::LossPtr loss_fn = nullptr, nn::OptimizerPtr optimizer = nullptr,
        std::map<std::string, metrics::MetricPtr> metrics = {});

  // Trains epochs initial_epoch+1 .. `epoch`. Items come from train_dataset's iterator for
  // each epoch number, so a run resumed at initial_epoch = k (after load_checkpoint) sees the
  // same data as the uninterrupted one. dataset_sink_mode has no effect on the CPU.
  // A NaN or infinite loss stops training with an error naming the step and the last
  // checkpoint; no checkpoint is written after it.
  void train(int64_t epoch, const dataset::Dataset& train_dataset,
             std::vector<callbacks::CallbackPtr> callbacks = {}, bool dataset_sink_mode = false,
             int64_t initial_epoch = 0);
  // train() plus eval(valid_dataset) every valid_frequency epochs (and after the last).
  void fit(int64_t epoch, const dataset::Dataset& train_dataset,
           const dataset::Dataset& valid_dataset, int64_t valid_frequency = 1,
           std::vector<callbacks::CallbackPtr> callbacks = {}, bool dataset_sink_mode = false,
           int64_t initial_epoch = 0);
  // The metrics over the whole dataset, plus "Loss" when the model has a loss function.
  std::map<std::string, double> eval(const dataset::Dataset& valid_dataset);
  // Outputs for one batch, in inference mode without gradients.
  Tensor predict(const Tensor& batch);

  // Checkpoints with the run position: epoch, step, architecture, RNG states.
  void save_checkpoint(const std::string& path, io::Metadata extra = {}) const;
  // Restores the network, optimizer (when present), global RNG and step count; returns the
  // file's metadata ("epoch" is the number of epochs done).
  io::Metadata load_checkpoint(const std::string& path);

  // Gradient accumulation: each optimizer step sums the gradients of `batches` consecutive
  // batches, each loss scaled by 1 / (the batches in the step), i.e. one step on their combined
  // batch (the last step of an epoch may have fewer). Under DistributedDataParallel only the
  // last batch of a step communicates (no_sync()). Steps, schedules, callbacks and checkpoints
  // count optimizer steps; a step's loss is the mean over its samples. 1 (default): off.
  void set_accumulation_steps(int64_t batches);
  int64_t accumulation_steps() const { return accumulation_; }
  // Optimizer steps in one epoch over `dataset`: its batches / accumulation_steps, rounded up.
  int64_t steps_per_epoch(const dataset::Dataset& dataset) const;

  // A name stored in checkpoints and shown in mismatch errors, e.g. "seedcnn(1x28x28, 10)".
  void set_architecture(std::string name) { architecture_ = std::move(name); }
  const std::string& architecture() const { return architecture_; }
  // Extra metadata written into every checkpoint (e.g. the command line's settings).
  void set_checkpoint_metadata(io::Metadata metadata) {
    checkpoint_metadata_ = std::move(metadata);
  }

  const std::vector<callbacks::EpochRecord>& history() const { return history_; }
  int64_t epochs_done() const { return epochs_done_; }
  int64_t global_step() const { return step_; }
  nn::CellPtr network() const { return net_; }
  nn::OptimizerPtr optimizer() const { return opt_; }
  // Graph mode (context GRAPH_MODE when train() starts): the compiled training steps, or null.
  const graph::StepCompiler* graph_steps() const { return graph_.get(); }

 private:
  // The training loop (model.cpp): epochs of steps; a step is forward, zero grads, backward and
  // update, with accumulation, DDP and the NaN check as strategies beside it (train_step.h).
  void run(int64_t epoch, const dataset::Dataset& train_dataset,
           const dataset::Dataset* valid_dataset, int64_t valid_frequency,
           std::vector<callbacks::CallbackPtr> callbacks, int64_t initial_epoch);
  callbacks::EpochRecord train_epoch(const dataset::Dataset& train_dataset,
                                     train_detail::StepSync& sync, callbacks::RunContext& ctx,
                                     const std::vector<callbacks::CallbackPtr>& callbacks);
  double train_step(const train_detail::StepBatches& step, train_detail::StepSync& sync);
  train_detail::StepBatches next_step_batches(dataset::Iterator& it);
  Tensor forward(const train_detail::Batch& batch);
  void zero_grad();
  void backward(const Tensor& loss, train_detail::StepSync& sync, bool last);
  void update();
  // The step's graph-mode run: a capture or replay in graph mode, else an eager run.
  graph::StepRun begin_step(const train_detail::StepBatches& step);

  nn::CellPtr net_;
  nn::LossPtr loss_;
  nn::OptimizerPtr opt_;
  std::map<std::string, metrics::MetricPtr> metrics_;
  std::string architecture_;
  io::Metadata checkpoint_metadata_;
  std::vector<callbacks::EpochRecord> history_;
  int64_t epochs_done_ = 0;
  int64_t step_ = 0;
  int64_t accumulation_ = 1;
  callbacks::RunContext* context_ = nullptr;  // of the run in progress, for checkpoints
  double epoch_loss_sum_ = 0;                 // of the epoch in progress
  int64_t epoch_samples_ = 0;
  // Set by load_checkpoint() from a mid-epoch checkpoint: where the next run starts.
  int64_t resume_step_in_epoch_ = 0;
  double resume_loss_sum_ = 0;
  int64_t resume_samples_ = 0;
  int64_t resume_accumulation_ = 1;             // of the run that wrote the mid-epoch checkpoint
  std::unique_ptr<graph::StepCompiler> graph_;  // graph mode's compiled steps
  bool graph_mode_ = false;                     // of the run in progress
  size_t arena_reported_ = 0;                   // the last memory arena size logged
};

}  // namespace zenith
