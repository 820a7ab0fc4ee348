// What a fine-tuning run writes and reads back: metrics lines, checkpoints (weights and
// trainer_state.safetensors) and the evaluation of held-out data.
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "core/atomic_file.h"
#include "models/llama_loss.h"
#include "train/finetune_run.h"
#include "train/finetune_step.h"
#include "zenith/autograd.h"
#include "zenith/random.h"

namespace zenith::finetune::detail {

namespace fs = std::filesystem;

MetricsOut::MetricsOut(const std::string& out, bool writes) {
  if (!writes) return;
  tensorboard_.emplace(out + "/tensorboard");
  files_.emplace_back(out + "/metrics.jsonl", std::ios::app);
  if (const char* env = std::getenv("ZENITH_METRICS_FILE"); env && *env)
    files_.emplace_back(env, std::ios::app);
}

void MetricsOut::emit(const std::string& name, double value, int64_t step, int64_t epoch,
                      const std::string& event) {
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  nlohmann::json j = {
      {"step", step}, {"epoch", epoch}, {"name", name}, {"value", value}, {"time", now}};
  if (!event.empty()) j["event"] = event;
  const std::string line = j.dump() + "\n";
  for (auto& f : files_) f << line << std::flush;
  if (tensorboard_) tensorboard_->add_scalar(name, value, step);
}

namespace {
constexpr const char* kTrainerState = "trainer_state.safetensors";
}  // namespace

void save_output(const Checkpoint& c, int64_t step, const std::string& dir) {
  if (c.o.method == Method::lora) {
    if (c.adapter)
      io::save_lora_adapter(dir, *c.adapter);
    else
      models::save_lora(c.model, c.lora, dir);
  } else {
    c.model.save_pretrained(dir);
    models::copy_model_side_files(c.o.model, dir);
  }
  save_trainer_state(c, step, dir);
}

void save_trainer_state(const Checkpoint& c, int64_t step, const std::string& dir) {
  io::Metadata meta = {{"format", "zenith-finetune"},
                       {"step", std::to_string(step)},
                       {"settings", run_settings(c.o, c.ranks, c.pad_to).dump()},
                       {"rng", default_generator().state()}};
  if (c.scaler)
    for (const auto& [name, t] : c.scaler->state_dict())
      meta["loss_scaler." + name] = format("%.17g", t.item());
  io::save_safetensors(dir + "/" + kTrainerState, c.optimizer.state_dict(), meta);
}

TrainerState read_trainer_state(const Options& o, int ranks, int64_t pad_to) {
  const std::string path = o.resume + "/" + kTrainerState;
  ZENITH_CHECK(fs::exists(path), "[finetune] --resume ", o.resume, " has no ", kTrainerState,
               " (a checkpoint-<step> directory of zenith finetune)");
  io::Metadata meta;
  TrainerState t;
  t.optimizer = io::load_safetensors(path, &meta);
  ZENITH_CHECK(meta.count("settings") && meta.count("step") && meta.count("rng"), "[finetune] ",
               path, " lacks the step, settings or rng metadata");
  nlohmann::json saved = nlohmann::json::parse(meta.at("settings"));
  const nlohmann::json now = run_settings(o, ranks, pad_to);
  // Settings added later, as checkpoints written before them ran.
  for (const auto& [key, value] : {std::pair<const char*, nlohmann::json>{"ranks", 1},
                                   {"amp", "O0"},
                                   {"amp_dtype", "bf16"},
                                   {"pad_to_multiple_of", 1}})
    if (!saved.contains(key)) saved[key] = value;
  std::string changed;
  for (const auto& [key, value] : now.items())
    if (!saved.contains(key) || saved[key] != value)
      changed += "\n  " + key + ": " + value.dump() +
                 " (the checkpoint's: " + (saved.contains(key) ? saved[key].dump() : "absent") +
                 ")";
  ZENITH_CHECK(changed.empty(), "[finetune] cannot resume ", o.resume,
               " with changed settings:", changed);
  t.step = std::stoll(meta.at("step"));
  t.rng = meta.at("rng");
  t.meta = meta;
  return t;
}

void restore_loss_scaler(const TrainerState& state, nn::DynamicLossScaler& scaler) {
  if (!state.meta.count("loss_scaler.scale")) return;
  nn::StateDict dict;
  for (const std::string name : {"scale", "clean_steps"})
    dict[name] = Tensor::scalar(std::stod(state.meta.at("loss_scaler." + name)), DType::f64);
  scaler.load_state_dict(dict);
}

EvalRecord evaluate_shared(models::Llama& model, const Data& data, int64_t batch_size,
                           int64_t pad_id, const Ranks* ranks) {
  const bool was_training = model.training();
  model.eval();
  NoGradGuard no_grad;
  double total = 0;
  EvalRecord r;
  const size_t first = ranks ? size_t(ranks->rank()) : 0,
               every = ranks ? size_t(ranks->world()) : 1;
  for (size_t i = first * size_t(batch_size); i < data.examples.size();
       i += every * size_t(batch_size)) {
    std::vector<const Example*> part;
    for (size_t j = i; j < std::min(data.examples.size(), i + size_t(batch_size)); ++j)
      part.push_back(&data.examples[j]);
    Batch b = collate(part, pad_id);
    Tensor logits = forward(model, b);
    total += models::causal_lm_loss(logits, b.labels).item() * double(b.targets);
    r.targets += b.targets;
  }
  model.train(was_training);
  if (ranks) {
    const std::vector<double> sums = ranks->sum({total, double(r.targets)});
    total = sums[0];
    r.targets = int64_t(sums[1]);
  }
  r.loss = r.targets > 0 ? total / double(r.targets) : 0;
  r.perplexity = std::exp(r.loss);
  return r;
}

bool save_streamed_output(
    const Checkpoint& c, const models::LlamaConfig& config,
    const std::map<std::string, Tensor>& shapes,
    const std::function<void(const std::string&, const std::function<void(const Tensor&)>&)>& visit,
    int64_t step, const std::string& dir, bool writes) {
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const auto& [name, p] : shapes) {
    if (p.dtype() != DType::f32) return false;
    const uint64_t n = uint64_t(p.numel()) * 4;
    header[name] = {{"dtype", "F32"}, {"shape", p.shape()}, {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  if (offset > io::kHfDefaultMaxShardBytes) return false;
  header["__metadata__"] = {{"format", "pt"}};
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');
  std::optional<core::AtomicFile> out;
  if (writes) {
    std::filesystem::create_directories(dir);
    out.emplace(dir + "/" + io::kHfWeightsFile);
    unsigned char size_le[8];
    for (int i = 0; i < 8; ++i) size_le[i] = uint8_t(uint64_t(json.size()) >> (8 * i));
    out->write(size_le, 8);
    out->write(json);
  }
  NoGradGuard no_grad;
  for (const auto& [name, p] : shapes) {  // every rank in the same order: visits may gather
    visit(name, [&, &name = name, &p = p](const Tensor& t) {
      const Tensor whole = t.contiguous();
      ZENITH_CHECK(whole.shape() == p.shape() && whole.dtype() == DType::f32, "[finetune] '", name,
                   "' to save has shape ", shape_str(whole.shape()), ", the model's is ",
                   shape_str(p.shape()));
      if (out && whole.nbytes() > 0) out->write(whole.raw_data(), whole.nbytes());
    });
  }
  if (!writes) return true;
  out->commit();
  std::error_code ec;
  std::filesystem::remove(std::filesystem::path(dir) / io::kHfIndexFile, ec);
  models::LlamaConfig saved = config;
  saved.torch_dtype = "float32";
  models::save_llama_config(dir, saved);
  models::copy_model_side_files(c.o.model, dir);
  save_trainer_state(c, step, dir);
  return true;
}

}  // namespace zenith::finetune::detail
