// ModelCheckpoint: <dir>/<prefix>_epoch_<N>.safetensors every N epochs and/or
// <prefix>_step_<S>.safetensors every S steps, atomically written; keeps the newest
// keep_checkpoint_max of the files it wrote.
#include <deque>
#include <filesystem>

#include "zenith/train.h"

namespace zenith::callbacks {

namespace {

class ModelCheckpointImpl final : public Callback {
 public:
  ModelCheckpointImpl(std::string dir, CheckpointConfig config)
      : dir_(std::move(dir)), config_(std::move(config)) {
    ZENITH_CHECK(config_.save_checkpoint_epochs >= 0 && config_.save_checkpoint_steps >= 0 &&
                     config_.keep_checkpoint_max >= 0,
                 "[ModelCheckpoint] intervals and keep_checkpoint_max must be >= 0");
  }
  void on_train_begin(RunContext&) override {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    ZENITH_CHECK(!ec, "[ModelCheckpoint] ", dir_, ": cannot create directory: ", ec.message());
  }
  void on_train_step_end(RunContext& ctx) override {
    if (config_.save_checkpoint_steps > 0 && ctx.step % config_.save_checkpoint_steps == 0)
      save(ctx, config_.prefix + "_step_" + std::to_string(ctx.step));
  }
  void on_train_epoch_end(RunContext& ctx) override {
    if (config_.save_checkpoint_epochs > 0 && ctx.epoch % config_.save_checkpoint_epochs == 0)
      save(ctx, config_.prefix + "_epoch_" + std::to_string(ctx.epoch));
  }

 private:
  void save(RunContext& ctx, const std::string& stem) {
    std::string path = (std::filesystem::path(dir_) / (stem + ".safetensors")).string();
    ctx.model->save_checkpoint(path);
    ctx.last_checkpoint = path;
    if (written_.empty() || written_.back() != path) written_.push_back(path);
    while (config_.keep_checkpoint_max > 0 &&
           int64_t(written_.size()) > config_.keep_checkpoint_max) {
      std::error_code ec;
      std::filesystem::remove(written_.front(), ec);  // gone already is fine
      written_.pop_front();
    }
  }

  std::string dir_;
  CheckpointConfig config_;
  std::deque<std::string> written_;
};

}  // namespace

CallbackPtr ModelCheckpoint(const std::string& directory, CheckpointConfig config) {
  return std::make_shared<ModelCheckpointImpl>(directory, std::move(config));
}

}  // namespace zenith::callbacks
