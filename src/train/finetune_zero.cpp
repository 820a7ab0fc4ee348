#include "train/finetune_zero.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "distributed/zero_checkpoint.h"
#include "train/finetune_zero_lora.h"
#include "zenith/autograd.h"
#include "zenith/error.h"
#include "zenith/io.h"

namespace zenith::finetune::detail {

namespace fs = std::filesystem;

constexpr const char* kParallelDir = "parallel";  // finetune_parallel.cpp's kParallelStateDir

TrainerState read_resume_state(const Options& o, int ranks, int64_t pad_to) {
  // Model parallelism: the checkpoint counts the data-parallel ranks.
  if (model_parallel(o)) ranks /= int(o.tensor_parallel * o.pipeline_parallel);
  const std::string zero_dir = o.resume + "/" + kZeroStateDir;
  // Model parallelism keeps its optimizer state, with --zero or not, in parallel/.
  const std::string state_dir = model_parallel(o) ? o.resume + "/" + kParallelDir : zero_dir;
  const bool sharded = fs::exists(state_dir + "/" + distributed::kShardedMetadataFile);
  if (o.zero_stage == 0 || ranks < 2) {
    ZENITH_CHECK(!fs::exists(zero_dir), "[finetune] --resume ", o.resume,
                 " was written by a --zero run (its optimizer state is sharded in ", zero_dir,
                 "): resume it with --zero on 2 or more ranks");
    return read_trainer_state(o, ranks, pad_to);
  }
  ZENITH_CHECK(sharded, "[finetune] --resume ", o.resume, " with --zero: it has no ", state_dir,
               "/", distributed::kShardedMetadataFile,
               " (a checkpoint-<step> directory of a zenith finetune --zero run)");
  // The checkpoint's rank count and per-rank batch, where their product is this run's.
  const std::string state = o.resume + "/trainer_state.safetensors";
  ZENITH_CHECK(fs::exists(state), "[finetune] --resume ", o.resume, " has no ", state);
  const io::Metadata meta = io::read_safetensors_metadata(state);
  ZENITH_CHECK(meta.count("settings"), "[finetune] ", state, " lacks the settings metadata");
  const nlohmann::json saved = nlohmann::json::parse(meta.at("settings"));
  Options same = o;
  int saved_ranks = ranks;
  if (saved.contains("ranks") && saved.contains("batch_size")) {
    const int r = saved["ranks"].get<int>();
    const int64_t b = saved["batch_size"].get<int64_t>();
    if (int64_t(r) * b == int64_t(ranks) * o.batch_size) {
      saved_ranks = r;
      same.batch_size = b;
    }
  }
  return read_trainer_state(same, saved_ranks, pad_to);
}

bool zero3_shape_only(const Options& o, int ranks) {
  const std::string dir = !o.resume.empty() ? o.resume : o.model;
  return o.zero_stage == 3 && ranks > 1 && o.method == Method::full && !model_parallel(o) &&
         (o.init == Init::random || fs::is_directory(dir));
}

std::shared_ptr<models::Llama> shape_only_model(const Options& o, int rank, int ranks,
                                                distributed::LlamaRows& rows) {
  const models::LlamaConfig config = models::load_llama_config(model_config_path(o));
  if (!o.resume.empty())
    rows = distributed::llama_pretrained_rows(o.resume, rank, ranks);
  else if (o.init == Init::random)
    rows = distributed::llama_initial_rows(config, rank, ranks);
  else
    rows = distributed::llama_pretrained_rows(o.model, rank, ranks);
  return distributed::hollow_llama(config);
}

std::function<Tensor(size_t, distributed::Chunk)> zero_rows_of(const models::Llama& model,
                                                               distributed::LlamaRows& rows) {
  if (rows.empty()) return {};
  return distributed::llama_rows_of(model, std::exchange(rows, {}));
}

distributed::ZeroOptions zero_options(const Options& o, const distributed::ParallelLlama* run,
                                      std::function<Tensor(size_t, distributed::Chunk)> rows_of) {
  distributed::ZeroOptions z{.stage = int(o.zero_stage),
                             .reduce = communication::ReduceOp::SUM,
                             .reduce_in_backward = false,
                             .rows_of = std::move(rows_of)};
  if (run) z.group = run->mesh().data_group();
  return z;
}

distributed::ModelParallelNorm zero_norm_layout(const distributed::ParallelLlama& run,
                                                const std::vector<Tensor>& params) {
  const distributed::DeviceMesh& mesh = run.mesh();
  distributed::ModelParallelNorm layout;
  layout.group = mesh.tensor_group();
  if (mesh.degree(distributed::MeshDim::pipeline) > 1) layout.pipeline = mesh.pipeline_group();
  const std::vector<std::string> names =
      parameter_names(const_cast<distributed::ParallelLlama&>(run).model(), params);
  for (const std::string& name : names) {
    layout.split.push_back(run.plan().sharded.count(name) > 0);
    // A tied embedding's copy on the last stage is counted on the first.
    layout.counted.push_back(mesh.pipeline_rank() == 0 || name != "model.embed_tokens.weight");
  }
  return layout;
}

std::vector<std::string> parameter_names(const models::Llama& model,
                                         const std::vector<Tensor>& params) {
  std::vector<std::string> names;
  const auto named = model.named_parameters();
  for (const Tensor& p : params) {
    std::string found;
    for (const auto& [name, t] : named)
      if (&t.impl() == &p.impl()) found = name;
    ZENITH_CHECK(!found.empty(), "[finetune] a trainable parameter has no name in the model");
    names.push_back(found);
  }
  return names;
}

bool save_zero3_output(const Checkpoint& c, distributed::ZeroOptimizer& zero, bool writes,
                       int64_t step, const std::string& dir) {
  std::map<std::string, Tensor> params;
  for (const auto& [name, p] : c.model.named_parameters()) params.emplace(name, p);
  return save_streamed_output(
      c, c.model.config(), params,
      [&](const std::string& name, const auto& write) {
        const Tensor& p = params.at(name);
        const int i = zero.index_of(p);
        if (i >= 0) zero.gather(size_t(i));
        write(p.detach());
        if (i >= 0) zero.release(size_t(i));
      },
      step, dir, writes);
}

double zero_state_bytes_per_rank(int64_t stage, const std::vector<Tensor>& params, int ranks) {
  double psi = 0;
  for (const Tensor& p : params) psi += double(p.numel());
  const double n = ranks;
  return stage == 1 ? 8 * psi + 8 * psi / n : stage == 2 ? 4 * psi + 12 * psi / n : 16 * psi / n;
}

EvalRecord evaluate_zero3(models::Llama& model,
                          const std::shared_ptr<distributed::ZeroOptimizer>& zero, const Data& data,
                          int64_t batch_size, int64_t pad_id, const Ranks& ranks,
                          const distributed::ParallelLlama* run) {
  const bool was_training = model.training();
  model.eval();
  NoGradGuard no_grad;
  std::function<Tensor(models::Llama&, const std::shared_ptr<distributed::ZeroOptimizer>&,
                       const Tensor&, const Tensor&, const Tensor&, double, bool)>
      loss_of = has_frozen_parameters(model) ? zero3_lora_loss : distributed::zero3_llama_loss;
  if (run)
    loss_of = [run](models::Llama& m, const std::shared_ptr<distributed::ZeroOptimizer>& z,
                    const Tensor& ids, const Tensor& mask, const Tensor& labels, double weight,
                    bool has_targets) {
      return (has_frozen_parameters(m) ? zero3_tensor_parallel_lora_loss
                                       : distributed::zero3_tensor_parallel_llama_loss)(
          m, run->plan(), z, ids, mask, labels, weight, has_targets);
    };
  const size_t n = data.examples.size(), batch = size_t(batch_size), world = size_t(ranks.world());
  const size_t rounds = ((n + batch - 1) / batch + world - 1) / world;
  double total = 0;
  EvalRecord r;
  for (size_t round = 0; round < rounds; ++round) {
    const size_t first = (round * world + size_t(ranks.rank())) * batch;
    std::vector<const Example*> part;
    for (size_t j = first; j < std::min(n, first + batch); ++j) part.push_back(&data.examples[j]);
    const bool stand_in = part.empty();
    if (stand_in) part.push_back(&data.examples[0]);
    // Sequence parallelism splits the positions over the tensor group.
    const Batch b =
        collate(part, pad_id, run && run->plan().tp.sequence_parallel ? run->plan().degree() : 1);
    const bool counts = !stand_in && b.targets > 0;
    const double loss =
        loss_of(model, zero, b.input_ids, b.attention_mask, b.labels, 1.0, counts).item();
    if (!counts) continue;
    total += loss * double(b.targets);
    r.targets += b.targets;
  }
  model.train(was_training);
  const std::vector<double> sums = ranks.sum({total, double(r.targets)});
  r.targets = int64_t(sums[1]);
  r.loss = r.targets > 0 ? sums[0] / double(r.targets) : 0;
  r.perplexity = std::exp(r.loss);
  return r;
}

void save_zero_state(const std::string& dir, const distributed::ZeroOptimizer& zero,
                     const std::vector<std::string>& names, const distributed::ParallelLlama* run) {
  if (run)
    return distributed::save_sharded(dir + "/" + kParallelDir, run->zero_optimizer_pieces(zero));
  distributed::save_zero_checkpoint(dir + "/" + kZeroStateDir, zero, names);
}

void load_zero_state(const std::string& resume, distributed::ZeroOptimizer& zero,
                     const std::vector<std::string>& names, const distributed::ParallelLlama* run) {
  if (run)
    return run->load_zero_optimizer(
        distributed::ShardedCheckpointReader(resume + "/" + kParallelDir), zero);
  distributed::load_zero_checkpoint(resume + "/" + kZeroStateDir, zero, names);
}

}  // namespace zenith::finetune::detail
