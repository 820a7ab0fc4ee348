// `zenith train`'s settings schema, checks, and the optimizer they describe.
#include "cli/train_settings.h"

#include <algorithm>

namespace zenith::cli {

SettingsSchema train_schema(TrainSettings& s) {
  SettingsSchema schema("train");
  schema.add("model", s.model, "zoo model: seedcnn, lenet, resnet18")
      .add("dataset", s.dataset, "fashion-mnist, mnist, cifar10 or image-folder")
      .add("data-dir", s.data_dir, "dataset directory (default: the dataset's standard location)")
      .add("epochs", s.epochs, "total epochs to train")
      .add("batch-size", s.batch_size, "training batch size")
      .add("accumulate-steps", s.accumulate_steps,
           "batches whose gradients make one optimizer step "
           "(gradient accumulation; the effective batch is batch-size x this)")
      .add("lr", s.lr, "learning rate (peak rate with a schedule)")
      .add("optimizer", s.optimizer, "momentum, sgd, adam or adamw")
      .add("momentum", s.momentum, "momentum of the momentum optimizer")
      .add("nesterov", s.nesterov, "Nesterov momentum")
      .add("weight-decay", s.weight_decay, "L2 weight decay")
      .add("label-smoothing", s.label_smoothing, "cross-entropy label smoothing in [0, 1)")
      .add("schedule", s.schedule,
           "learning-rate schedule: constant, cosine, step or wsd "
           "(warmup, constant, linear decay to 0)")
      .add("warmup-epochs", s.warmup_epochs, "cosine and wsd: linear warmup epochs")
      .add("decay-epochs", s.decay_epochs,
           "wsd: epochs of the final linear decay (0: the last 30%, at least 1)")
      .add("step-epochs", s.step_epochs, "step schedule: multiply the rate by gamma every N epochs")
      .add("gamma", s.gamma, "step schedule factor")
      .add("seed", s.seed, "seed of initialisation, shuffling and augmentation")
      .add("threads", s.threads, "compute threads (0: ZENITH_NUM_THREADS or all cores)")
      .add("workers", s.workers, "input pipeline worker threads")
      .add("augment", s.augment, "training augmentation: none, flip, crop or crop+flip")
      .add("eval-epochs", s.eval_epochs, "evaluate on the test split every N epochs")
      .add("patience", s.patience, "stop after N evaluations without a lower test loss (0: off)")
      .add("keep-checkpoints", s.keep_checkpoints, "keep only the newest N checkpoints (0: all)")
      .add("save-steps", s.save_steps, "also checkpoint every N steps (0: only per epoch)")
      .add("log-every", s.log_every, "steps between logged losses and progress lines")
      .add("limit-train", s.limit_train, "train on the first N samples only (0: all)")
      .add("limit-test", s.limit_test, "evaluate on the first N samples only (0: all)")
      .add("image-size", s.image_size,
           "resize images to N x N (bilinear; 0: the dataset's own size)")
      .add("out", s.out, "output directory (default: out/<dataset>-<model>)")
      .add("progress", s.progress, "auto, bar, plain or none")
      .add("mode", s.mode,
           "pynative (run op by op) or graph (capture the training step once per batch "
           "shape, fuse, plan memory, replay)");
  return schema;
}

nlohmann::json to_json(TrainSettings s) { return train_schema(s).to_json(); }

void check_and_complete(TrainSettings& s) {
  ZENITH_CHECK(
      s.augment == "none" || s.augment == "flip" || s.augment == "crop" || s.augment == "crop+flip",
      "[train] unknown augment '", s.augment, "' (known: none, flip, crop, crop+flip)");
  ZENITH_CHECK(s.epochs > 0 && s.batch_size > 0 && s.accumulate_steps > 0 && s.eval_epochs > 0 &&
                   s.log_every > 0,
               "[train] epochs, batch-size, accumulate-steps, eval-epochs and log-every must be "
               "positive");
  ZENITH_CHECK(s.mode == "pynative" || s.mode == "graph", "[train] unknown mode '", s.mode,
               "' (known: pynative, graph)");
  if (s.out.empty()) s.out = "out/" + s.dataset + "-" + s.model;
}

namespace {

nn::LRSchedule make_schedule(const TrainSettings& s, int64_t steps_per_epoch) {
  if (s.schedule == "cosine")
    return nn::warmup_cosine_lr(s.lr, s.warmup_epochs * steps_per_epoch,
                                s.epochs * steps_per_epoch);
  if (s.schedule == "step")
    return nn::step_lr(s.lr, std::max<int64_t>(1, s.step_epochs) * steps_per_epoch, s.gamma);
  if (s.schedule == "wsd") {
    const int64_t decay =
        s.decay_epochs > 0 ? s.decay_epochs : std::max<int64_t>(1, s.epochs * 3 / 10);
    ZENITH_CHECK(s.warmup_epochs + decay <= s.epochs, "[train] wsd schedule: warmup-epochs (",
                 s.warmup_epochs, ") + decay-epochs (", decay, ") exceed epochs (", s.epochs, ")");
    return nn::warmup_stable_decay_lr(s.lr, s.warmup_epochs * steps_per_epoch,
                                      (s.epochs - decay) * steps_per_epoch,
                                      s.epochs * steps_per_epoch);
  }
  ZENITH_CHECK(s.schedule == "constant", "[train] unknown schedule '", s.schedule,
               "' (known: constant, cosine, step, wsd)");
  return nn::constant_lr(s.lr);
}

}  // namespace

nn::OptimizerPtr make_optimizer(const TrainSettings& s, const std::vector<Tensor>& params,
                                int64_t steps_per_epoch) {
  nn::LRSchedule lr = make_schedule(s, steps_per_epoch);
  if (s.optimizer == "momentum")
    return nn::Momentum(params, lr, s.momentum, s.weight_decay, s.nesterov);
  if (s.optimizer == "sgd") return nn::Momentum(params, lr, 0.0, s.weight_decay);
  if (s.optimizer == "adam") return nn::Adam(params, lr, 0.9, 0.999, 1e-8, s.weight_decay);
  if (s.optimizer == "adamw") return nn::AdamW(params, lr, 0.9, 0.999, 1e-8, s.weight_decay);
  ZENITH_FAIL("[train] unknown optimizer '", s.optimizer, "' (known: momentum, sgd, adam, adamw)");
}

}  // namespace zenith::cli
