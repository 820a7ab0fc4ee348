// Model: the training loop (forward, loss, backward, optimizer step), evaluation, prediction,
// and checkpoints that carry the run's position so a resumed run repeats the original exactly.
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>

#include "zenith/autograd.h"
#include "zenith/communication.h"
#include "zenith/ddp.h"
#include "zenith/random.h"
#include "zenith/train.h"

namespace zenith {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
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

// A row's input and label columns.
std::pair<Tensor, Tensor> split_row(const dataset::Row& row) {
  ZENITH_CHECK(row.size() >= 2, "[Model] dataset rows need (input, label) columns, got ",
               row.size(), " column(s)");
  return {row[0], row[1]};
}

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

// Communication totals since the run began, for the scalar loggers and the epoch record.
void update_comm_counters(callbacks::RunContext& ctx, const nn::DistributedDataParallelImpl& ddp,
                          const communication::Stats& at_start, double wait_at_start) {
  auto now = communication::stats();
  ctx.comm_bytes = int64_t(now.bytes_sent + now.bytes_received) -
                   int64_t(at_start.bytes_sent + at_start.bytes_received);
  ctx.comm_seconds = now.seconds - at_start.seconds;
  ctx.comm_wait_seconds = ddp.stats().wait_seconds - wait_at_start;
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

  auto* ddp = dynamic_cast<nn::DistributedDataParallelImpl*>(net_.get());
  const communication::Stats comm_start = ddp ? communication::stats() : communication::Stats{};
  const double wait_start = ddp ? ddp->stats().wait_seconds : 0.0;
  callbacks::RunContext ctx;
  ContextScope scope(context_, &ctx);
  ctx.model = this;
  ctx.epochs = epoch;
  ctx.initial_epoch = initial_epoch;
  ctx.step = step_;
  ctx.steps_per_epoch = steps_per_epoch(train_dataset);
  // A checkpoint taken mid-epoch resumes at its step, with that epoch's loss so far.
  int64_t resume_at = initial_epoch == epochs_done_ ? resume_step_in_epoch_ : 0;
  ZENITH_CHECK(resume_at == 0 || resume_accumulation_ == accumulation_,
               "[Model] the checkpoint "
               "was taken mid-epoch with ",
               resume_accumulation_,
               " accumulation steps; resume "
               "with the same (set_accumulation_steps(",
               resume_accumulation_, ")), not ", accumulation_);
  for (auto& cb : cbs) cb->on_train_begin(ctx);

  for (int64_t e = initial_epoch + 1; e <= epoch && !ctx.stop_requested; ++e) {
    ctx.epoch = e;
    ctx.step_in_epoch = e == initial_epoch + 1 ? resume_at : 0;
    epoch_loss_sum_ = ctx.step_in_epoch ? resume_loss_sum_ : 0.0;
    epoch_samples_ = ctx.step_in_epoch ? resume_samples_ : 0;
    for (auto& cb : cbs) cb->on_train_epoch_begin(ctx);
    net_->set_train(true);
    auto start = Clock::now();
    int64_t images = 0;
    const callbacks::RunContext epoch_start = ctx;
    auto it = train_dataset.create_iterator(
        e - 1, 0, 0, std::min(train_dataset.get_dataset_size(), ctx.step_in_epoch * accumulation_));
    std::vector<std::pair<Tensor, Tensor>> batches;  // of one optimizer step
    for (;;) {
      auto step_start = Clock::now();
      batches.clear();
      while (int64_t(batches.size()) < accumulation_) {
        auto row = it.next();
        if (!row) break;
        batches.push_back(split_row(*row));
      }
      if (batches.empty()) break;
      ctx.step_in_epoch += 1;
      ctx.batch_size = 0;
      for (const auto& [x, _] : batches) ctx.batch_size += x.dim() > 0 ? x.size(0) : 1;
      ctx.learning_rate = opt_->current_lr();
      for (auto& cb : cbs) cb->on_train_step_begin(ctx);

      auto check_finite = [&](double value) {
        if (std::isfinite(value)) return;
        ZENITH_FAIL("[train] loss is ", value, " at epoch ", e, ", step ", ctx.step_in_epoch,
                    " of ", ctx.steps_per_epoch, " (global step ", step_ + 1,
                    "); stopped before applying this step (lower the learning rate or check "
                    "the data). ",
                    ctx.last_checkpoint.empty()
                        ? std::string("No checkpoint was written in this run.")
                        : "The last good checkpoint is " + ctx.last_checkpoint);
      };
      opt_->zero_grad();
      double value = 0, loss_sum = 0;  // the step's mean loss per sample; its running sum
      communication::Work loss_work;
      Tensor global_loss;
      for (size_t b = 0; b < batches.size(); ++b) {
        const auto& [x, y] = batches[b];
        const bool last = b + 1 == batches.size();
        Tensor loss = (*loss_)(net_->forward(x), y);
        const double batch_loss = loss.item();
        loss_sum += batch_loss * double(x.dim() > 0 ? x.size(0) : 1);
        if (last) value = batches.size() == 1 ? batch_loss : loss_sum / double(ctx.batch_size);
        if (!ddp) check_finite(batch_loss);
        if (batches.size() > 1) loss = loss * (1.0 / double(batches.size()));
        if (ddp && !last) {  // only the step's last backward communicates
          auto local = ddp->no_sync();
          loss.backward();
          continue;
        }
        // Data parallel: the step's loss is the mean over ranks, reduced while backward runs;
        // every rank then checks the same value, so a NaN on one rank stops all of them here.
        if (ddp) {
          global_loss = Tensor::from_vector(std::vector<double>{value}, {1});
          loss_work = communication::all_reduce_async(global_loss, communication::ReduceOp::AVG,
                                                      ddp->group());
        }
        loss.backward();
      }
      if (ddp) {
        loss_work.wait();
        value = global_loss.item();
        check_finite(value);
        update_comm_counters(ctx, *ddp, comm_start, wait_start);
      }
      opt_->step();

      ctx.step = ++step_;
      ctx.loss = value;
      epoch_loss_sum_ += value * double(ctx.batch_size);
      epoch_samples_ += ctx.batch_size;
      images += ctx.batch_size;
      ctx.step_seconds = seconds_since(step_start);
      for (auto& cb : cbs) cb->on_train_step_end(ctx);
      if (ctx.stop_requested) break;
    }
    bool finished = ctx.step_in_epoch == ctx.steps_per_epoch;
    callbacks::EpochRecord record;
    record.epoch = e;
    record.loss = epoch_samples_ ? epoch_loss_sum_ / double(epoch_samples_) : 0.0;
    record.seconds = seconds_since(start);
    if (ddp) {  // throughput of the whole job
      Tensor n = Tensor::from_vector(std::vector<double>{double(images)}, {1});
      communication::all_reduce(n, communication::ReduceOp::SUM, ddp->group());
      images = int64_t(n.item());
      record.comm_bytes = ctx.comm_bytes - epoch_start.comm_bytes;
      record.comm_seconds = ctx.comm_seconds - epoch_start.comm_seconds;
      record.comm_wait_seconds = ctx.comm_wait_seconds - epoch_start.comm_wait_seconds;
    }
    record.images_per_second = record.seconds > 0 ? double(images) / record.seconds : 0.0;
    record.data_wait_seconds = it.wait_seconds();
    record.learning_rate = opt_->current_lr();
    if (!finished) {  // stopped mid-epoch: the epoch does not count
      for (auto& cb : cbs) cb->on_train_end(ctx);
      return;
    }
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
    auto [x, y] = split_row(*row);
    Tensor logits = net_->forward(x);
    double loss = loss_ ? (*loss_)(logits, y).item() : std::nan("");
    int64_t n = x.dim() > 0 ? x.size(0) : 1;
    loss_sum += loss * double(n);
    samples += n;
    for (auto& [_, m] : metrics_) m->update(logits, y, loss);
  }
  net_->set_train(was_training);
  std::map<std::string, double> out;
  for (auto& [name, m] : metrics_) out[name] = samples > 0 ? m->eval() : 0.0;
  if (loss_ && !out.count("Loss")) out["Loss"] = samples > 0 ? loss_sum / double(samples) : 0.0;
  if (ddp) {
    // Every built-in metric is a mean per sample: the job's value is the sample-weighted mean
    // of the ranks' values, exactly as if one process had evaluated the whole set.
    std::vector<double> sums = {double(samples)};
    for (auto& [_, v] : out) sums.push_back(v * double(samples));
    Tensor t = Tensor::from_vector(sums, {int64_t(sums.size())});
    communication::all_reduce(t, communication::ReduceOp::SUM, ddp->group());
    auto total = t.to_double_vector();
    ZENITH_CHECK(total[0] > 0, "[Model] the evaluation dataset is empty on every rank");
    size_t k = 1;
    for (auto& [_, v] : out) v = total[k++] / total[0];
  }
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
