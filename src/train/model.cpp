// Model: the training loop (epochs of steps; a step is forward, zero grads, backward, update, with
// gradient accumulation, DDP and the NaN check as strategies in train_step.h), evaluation,
// prediction, and checkpoints that carry the run's position so a resumed run repeats the original
// exactly.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "core/trace_range.h"
#include "train/train_step.h"
#include "zenith/autograd.h"
#include "zenith/communication.h"
#include "zenith/context.h"
#include "zenith/ddp.h"
#include "zenith/random.h"
#include "zenith/train.h"

namespace zenith {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Whether graph mode runs the optimizer's updates in the backward (graph::Options): by default
// when a step has one micro-batch, as nothing in Model::train reads .grad after the backward
// (no clipping, no gradient metrics; the NaN check reads the loss before the backward), and off
// with gradient accumulation. ZENITH_GRAPH_UPDATE_IN_BACKWARD=0 or 1 overrides it.
bool update_in_backward(int64_t accumulation) {
  const char* env = std::getenv("ZENITH_GRAPH_UPDATE_IN_BACKWARD");
  if (!env || !*env) return accumulation == 1;
  const std::string v = env;
  ZENITH_CHECK(v == "0" || v == "1",
               "[Model] ZENITH_GRAPH_UPDATE_IN_BACKWARD must be 0 or 1, got '", v, "'");
  return v == "1";
}

// Points the model at the run in progress for as long as it lasts.
class ContextScope {
 public:
  ContextScope(callbacks::RunContext*& slot, callbacks::RunContext* ctx) : slot_(slot) {
    slot_ = ctx;
  }
  ~ContextScope() { slot_ = nullptr; }
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;

 private:
  callbacks::RunContext*& slot_;
};

nlohmann::json history_json(const std::vector<callbacks::EpochRecord>& history) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : history)
    out.push_back({{"epoch", r.epoch},
                   {"loss", r.loss},
                   {"seconds", r.seconds},
                   {"images_per_second", r.images_per_second},
                   {"data_wait_seconds", r.data_wait_seconds},
                   {"learning_rate", r.learning_rate},
                   {"eval", r.eval}});
  return out;
}

std::vector<callbacks::EpochRecord> history_from_json(const nlohmann::json& j) {
  std::vector<callbacks::EpochRecord> out;
  for (const auto& r : j) {
    callbacks::EpochRecord e;
    e.epoch = r.at("epoch").get<int64_t>();
    e.loss = r.at("loss").get<double>();
    e.seconds = r.at("seconds").get<double>();
    e.images_per_second = r.at("images_per_second").get<double>();
    e.data_wait_seconds = r.value("data_wait_seconds", 0.0);
    e.learning_rate = r.at("learning_rate").get<double>();
    e.eval = r.at("eval").get<std::map<std::string, double>>();
    out.push_back(std::move(e));
  }
  return out;
}

// Data parallel evaluation: every built-in metric is a mean per sample, so the job's value is the
// sample-weighted mean of the ranks' values, exactly as if one process had evaluated the whole set.
void average_over_ranks(std::map<std::string, double>& results, int64_t samples,
                        const nn::DistributedDataParallelImpl& ddp) {
  std::vector<double> sums = {double(samples)};
  for (auto& [_, v] : results) sums.push_back(v * double(samples));
  Tensor t = Tensor::from_vector(sums, {int64_t(sums.size())});
  communication::all_reduce(t, communication::ReduceOp::SUM, ddp.group());
  auto total = t.to_double_vector();
  ZENITH_CHECK(total[0] > 0, "[Model] the evaluation dataset is empty on every rank");
  size_t k = 1;
  for (auto& [_, v] : results) v = total[k++] / total[0];
}

}  // namespace

Model::Model(nn::CellPtr network, nn::LossPtr loss_fn, nn::OptimizerPtr optimizer,
             std::map<std::string, metrics::MetricPtr> metrics)
    : net_(std::move(network)),
      loss_(std::move(loss_fn)),
      opt_(std::move(optimizer)),
      metrics_(std::move(metrics)) {
  ZENITH_CHECK(net_, "[Model] network is null");
  for (const auto& [name, m] : metrics_) ZENITH_CHECK(m, "[Model] metric '", name, "' is null");
  architecture_ = net_->type_name();
}

void Model::set_accumulation_steps(int64_t batches) {
  ZENITH_CHECK(batches >= 1, "[Model] accumulation steps must be >= 1, got ", batches);
  accumulation_ = batches;
}

int64_t Model::steps_per_epoch(const dataset::Dataset& dataset) const {
  return (dataset.get_dataset_size() + accumulation_ - 1) / accumulation_;
}

void Model::train(int64_t epoch, const dataset::Dataset& train_dataset,
                  std::vector<callbacks::CallbackPtr> callbacks, bool dataset_sink_mode,
                  int64_t initial_epoch) {
  (void)dataset_sink_mode;  // the CPU reads host memory directly; nothing to sink
  run(epoch, train_dataset, nullptr, 0, std::move(callbacks), initial_epoch);
}

void Model::fit(int64_t epoch, const dataset::Dataset& train_dataset,
                const dataset::Dataset& valid_dataset, int64_t valid_frequency,
                std::vector<callbacks::CallbackPtr> callbacks, bool dataset_sink_mode,
                int64_t initial_epoch) {
  (void)dataset_sink_mode;
  ZENITH_CHECK(valid_frequency > 0, "[Model] valid_frequency must be positive, got ",
               valid_frequency);
  run(epoch, train_dataset, &valid_dataset, valid_frequency, std::move(callbacks), initial_epoch);
}

void Model::run(int64_t epoch, const dataset::Dataset& train_dataset,
                const dataset::Dataset* valid_dataset, int64_t valid_frequency,
                std::vector<callbacks::CallbackPtr> cbs, int64_t initial_epoch) {
  ZENITH_CHECK(loss_ && opt_, "[Model] training needs a loss function and an optimizer");
  ZENITH_CHECK(train_dataset.defined() && train_dataset.get_dataset_size() > 0,
               "[Model] the training dataset is empty");
  ZENITH_CHECK(initial_epoch >= 0 && initial_epoch <= epoch, "[Model] initial_epoch ",
               initial_epoch, " is outside [0, ", epoch, "]");
  for (const auto& cb : cbs) ZENITH_CHECK(cb, "[Model] null callback");

  callbacks::RunContext ctx;
  auto sync = train_detail::make_step_sync(*net_, ctx);
  ContextScope scope(context_, &ctx);
  ctx.model = this;
  ctx.epochs = epoch;
  ctx.initial_epoch = initial_epoch;
  ctx.step = step_;
  ctx.steps_per_epoch = steps_per_epoch(train_dataset);
  // A checkpoint taken mid-epoch resumes at its step, with that epoch's loss so far.
  const int64_t resume_at = initial_epoch == epochs_done_ ? resume_step_in_epoch_ : 0;
  ZENITH_CHECK(resume_at == 0 || resume_accumulation_ == accumulation_,
               "[Model] the checkpoint was taken mid-epoch with ", resume_accumulation_,
               " accumulation steps; resume with the same (set_accumulation_steps(",
               resume_accumulation_, ")), not ", accumulation_);
  for (auto& cb : cbs) cb->on_train_begin(ctx);
  graph_mode_ = context::get_context().mode == context::GRAPH_MODE;
  if (graph_mode_ && dynamic_cast<nn::DistributedDataParallelImpl*>(net_.get())) {
    std::printf(
        "graph: DistributedDataParallel all-reduces gradients in autograd hooks, not ops; "
        "training runs eagerly\n");
    graph_mode_ = false;
  }

  for (int64_t e = initial_epoch + 1; e <= epoch && !ctx.stop_requested; ++e) {
    ctx.epoch = e;
    ctx.step_in_epoch = e == initial_epoch + 1 ? resume_at : 0;
    epoch_loss_sum_ = ctx.step_in_epoch ? resume_loss_sum_ : 0.0;
    epoch_samples_ = ctx.step_in_epoch ? resume_samples_ : 0;
    for (auto& cb : cbs) cb->on_train_epoch_begin(ctx);
    callbacks::EpochRecord record = train_epoch(train_dataset, *sync, ctx, cbs);
    if (ctx.step_in_epoch != ctx.steps_per_epoch) break;  // stopped mid-epoch: it does not count
    epochs_done_ = e;
    resume_step_in_epoch_ = 0;
    if (valid_dataset && (e % valid_frequency == 0 || e == epoch)) {
      ctx.eval_results = eval(*valid_dataset);
      record.eval = ctx.eval_results;
      for (auto& cb : cbs) cb->on_eval_end(ctx);
    }
    history_.push_back(record);
    ctx.epoch_record = record;
    for (auto& cb : cbs) cb->on_train_epoch_end(ctx);
  }
  for (auto& cb : cbs) cb->on_train_end(ctx);
}

// The steps of epoch ctx.epoch from ctx.step_in_epoch on, until the data ends or a callback
// asks to stop; returns the epoch's record (without validation).
callbacks::EpochRecord Model::train_epoch(const dataset::Dataset& train_dataset,
                                          train_detail::StepSync& sync, callbacks::RunContext& ctx,
                                          const std::vector<callbacks::CallbackPtr>& cbs) {
  net_->set_train(true);
  const auto start = Clock::now();
  const callbacks::RunContext epoch_start = ctx;
  int64_t samples = 0;
  auto it = train_dataset.create_iterator(
      ctx.epoch - 1, 0, 0,
      std::min(train_dataset.get_dataset_size(), ctx.step_in_epoch * accumulation_));
  while (it.position() < it.size()) {
    // The step's phases for the profiler: data wait, then train_step's (core/trace_range.h).
    core::TraceRange step_range(core::Range::step);
    const auto step_start = Clock::now();
    const train_detail::StepBatches step = next_step_batches(it);
    if (step.batches.empty()) break;
    ctx.step_in_epoch += 1;
    ctx.batch_size = step.samples;
    ctx.learning_rate = opt_->current_lr();
    ctx.step_scalars.clear();
    for (auto& cb : cbs) cb->on_train_step_begin(ctx);

    const double loss = train_step(step, sync);
    if (graph_) {
      if (auto capture = graph_->take_new_capture()) ctx.step_scalars = capture->scalars();
      if (graph_->arena_bytes() != arena_reported_) {
        arena_reported_ = graph_->arena_bytes();
        ctx.step_scalars["graph/arena_mb"] = double(arena_reported_) / 1e6;
      }
    }

    ctx.step = ++step_;
    ctx.loss = loss;
    epoch_loss_sum_ += loss * double(step.samples);
    epoch_samples_ += step.samples;
    samples += step.samples;
    ctx.step_seconds = seconds_since(step_start);
    for (auto& cb : cbs) cb->on_train_step_end(ctx);
    if (ctx.stop_requested) break;
  }
  callbacks::EpochRecord record;
  record.epoch = ctx.epoch;
  record.loss = epoch_samples_ ? epoch_loss_sum_ / double(epoch_samples_) : 0.0;
  record.seconds = seconds_since(start);
  samples = sync.job_samples(samples);  // data parallel: the throughput of the whole job
  sync.record_communication(record, epoch_start);
  record.images_per_second = record.seconds > 0 ? double(samples) / record.seconds : 0.0;
  record.data_wait_seconds = it.wait_seconds();
  record.learning_rate = opt_->current_lr();
  return record;
}

// One optimizer step in llm.c's four calls: zero grads, then forward and backward of each
// micro-batch (one without gradient accumulation), then update. Returns the step's loss, the
// mean per sample (under data parallelism over all ranks). In graph mode the forward, backward
// and update phases are captured once per batch shape and replayed after; the code between them
// (the loss read, the NaN check) runs every step.
double Model::train_step(const train_detail::StepBatches& step, train_detail::StepSync& sync) {
  zero_grad();
  graph::StepRun run = begin_step(step);
  train_detail::StepLoss step_loss(step.batches.size(), step.samples);
  for (size_t b = 0; b < step.batches.size(); ++b) {
    const bool last = b + 1 == step.batches.size();
    Tensor loss = run.phase([&] { return std::vector<Tensor>{forward(step.batches[b])}; })[0];
    step_loss.add(loss.item(), step.batches[b].samples());
    sync.after_forward(step_loss, last);
    run.phase([&] {
      backward(train_detail::accumulation_scaled(loss, step.batches.size()), sync, last);
      return std::vector<Tensor>{};
    });
  }
  const double loss = sync.step_loss(step_loss);
  run.phase([&] {
    update();
    return std::vector<Tensor>{};
  });
  run.finish();
  return loss;
}

train_detail::StepBatches Model::next_step_batches(dataset::Iterator& it) {
  core::TraceRange range(core::Range::data_wait);
  return train_detail::next_step_batches(it, accumulation_);
}

graph::StepRun Model::begin_step(const train_detail::StepBatches& step) {
  if (!graph_mode_) return graph::StepRun::eager();
  if (!graph_) {
    std::vector<std::pair<std::string, Tensor>> state = net_->named_parameters();
    for (auto& b : net_->named_buffers()) state.push_back(b);
    for (auto& [name, t] : opt_->state_dict()) state.push_back({"optimizer." + name, t});
    graph_ = std::make_unique<graph::StepCompiler>(
        std::move(state), opt_.get(),
        graph::Options{.update_in_backward = update_in_backward(accumulation_)});
  }
  std::vector<Tensor> inputs;
  for (const auto& b : step.batches) {
    inputs.push_back(b.input);
    inputs.push_back(b.labels);
  }
  return graph_->begin(inputs, net_->training() ? "train" : "eval");
}

Tensor Model::forward(const train_detail::Batch& batch) {
  core::TraceRange range(core::Range::forward);
  return (*loss_)(net_->forward(batch.input), batch.labels);
}

void Model::zero_grad() {
  core::TraceRange range(core::Range::optimizer);
  opt_->zero_grad();
}

void Model::backward(const Tensor& loss, train_detail::StepSync& sync, bool last) {
  core::TraceRange range(core::Range::backward);
  sync.backward(loss, last);
}

void Model::update() {
  core::TraceRange range(core::Range::optimizer);
  opt_->step();
}

std::map<std::string, double> Model::eval(const dataset::Dataset& valid_dataset) {
  auto* ddp = dynamic_cast<nn::DistributedDataParallelImpl*>(net_.get());
  // Data parallel: each rank evaluates its own shard (possibly empty) and the results are
  // combined below.
  ZENITH_CHECK(valid_dataset.defined() && (ddp || valid_dataset.get_dataset_size() > 0),
               "[Model] the evaluation dataset is empty");
  NoGradGuard no_grad;
  if (ddp) ddp->sync_buffers();  // rank 0's batch-norm statistics everywhere
  bool was_training = net_->training();
  net_->set_train(false);
  for (auto& [_, m] : metrics_) m->clear();
  double loss_sum = 0;
  int64_t samples = 0;
  auto it = valid_dataset.create_iterator(0);
  while (auto row = it.next()) {
    const train_detail::Batch batch = train_detail::to_batch(*row);
    Tensor logits = net_->forward(batch.input);
    double loss = loss_ ? (*loss_)(logits, batch.labels).item() : std::nan("");
    loss_sum += loss * double(batch.samples());
    samples += batch.samples();
    for (auto& [_, m] : metrics_) m->update(logits, batch.labels, loss);
  }
  net_->set_train(was_training);
  std::map<std::string, double> out;
  for (auto& [name, m] : metrics_) out[name] = samples > 0 ? m->eval() : 0.0;
  if (loss_ && !out.count("Loss")) out["Loss"] = samples > 0 ? loss_sum / double(samples) : 0.0;
  if (ddp) average_over_ranks(out, samples, *ddp);
  return out;
}

Tensor Model::predict(const Tensor& batch) {
  NoGradGuard no_grad;
  bool was_training = net_->training();
  net_->set_train(false);
  Tensor out = net_->forward(batch);
  net_->set_train(was_training);
  return out;
}

void Model::save_checkpoint(const std::string& path, io::Metadata extra) const {
  for (const auto& [k, v] : checkpoint_metadata_) extra.emplace(k, v);
  extra["epoch"] = std::to_string(epochs_done_);
  extra["step"] = std::to_string(step_);
  extra["architecture"] = architecture_;
  extra["rng_state"] = default_generator().state();
  extra["data_seed"] = std::to_string(dataset::config::get_seed());
  extra["history"] = history_json(history_).dump();
  // Taken during an epoch (a step checkpoint): where in the epoch, and its loss so far.
  if (context_ && context_->step_in_epoch > 0 && context_->epoch == epochs_done_ + 1) {
    extra["step_in_epoch"] = std::to_string(context_->step_in_epoch);
    extra["epoch_loss_sum"] = nlohmann::json(epoch_loss_sum_).dump();
    extra["epoch_samples"] = std::to_string(epoch_samples_);
    extra["accumulation_steps"] = std::to_string(accumulation_);
  }
  io::save_checkpoint(path, *net_, opt_.get(), std::move(extra));
}

io::Metadata Model::load_checkpoint(const std::string& path) {
  io::Metadata meta = io::load_checkpoint(path, *net_, opt_.get());
  auto number = [&](const char* key, int64_t fallback) -> int64_t {
    auto it = meta.find(key);
    if (it == meta.end()) return fallback;
    try {
      return std::stoll(it->second);
    } catch (const std::exception&) {
      ZENITH_FAIL("[checkpoint] ", path, ": metadata '", key, "' is not a number: '", it->second,
                  "'");
    }
  };
  epochs_done_ = number("epoch", 0);
  step_ = number("step", 0);
  resume_step_in_epoch_ = number("step_in_epoch", 0);
  resume_samples_ = number("epoch_samples", 0);
  resume_accumulation_ = number("accumulation_steps", 1);
  resume_loss_sum_ = meta.count("epoch_loss_sum")
                         ? nlohmann::json::parse(meta["epoch_loss_sum"]).get<double>()
                         : 0;
  if (meta.count("rng_state")) default_generator().set_state(meta["rng_state"]);
  if (meta.count("history")) {
    try {
      history_ = history_from_json(nlohmann::json::parse(meta["history"]));
    } catch (const nlohmann::json::exception& e) {
      ZENITH_FAIL("[checkpoint] ", path, ": metadata 'history' is malformed: ", e.what());
    }
  }
  return meta;
}

}  // namespace zenith
