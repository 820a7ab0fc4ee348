// zenith finetune over tensor × pipeline × data ranks (--tensor-parallel, --pipeline-parallel):
// the model rewritten by distributed::ParallelLlama, the data split over its data group only,
// and the whole model or adapter gathered back for the outputs.
#include <cmath>
#include <filesystem>
#include <optional>

#include "core/allocator.h"
#include "distributed/parallelize_llama_train.h"
#include "distributed/zero_checkpoint.h"
#include "distributed/zero_llama.h"
#include "train/finetune_run.h"
#include "zenith/communication.h"
#include "zenith/hf.h"

namespace zenith::finetune::detail {

// A checkpoint's optimizer shards under model parallelism.
inline constexpr const char* kParallelStateDir = "parallel";

bool model_parallel(const Options& o) { return o.tensor_parallel * o.pipeline_parallel > 1; }

std::unique_ptr<distributed::ParallelLlama> make_parallel(const Options& o,
                                                          std::shared_ptr<models::Llama> model,
                                                          Ranks& ranks, std::vector<Tensor>& params,
                                                          const Log& log) {
  ZENITH_CHECK(communication::is_initialized() &&
                   communication::get_group_size() % (o.tensor_parallel * o.pipeline_parallel) == 0,
               "[finetune] --tensor-parallel ", o.tensor_parallel, " x --pipeline-parallel ",
               o.pipeline_parallel, " must divide the ranks (--nproc or the job's npu/nodes), got ",
               communication::is_initialized() ? communication::get_group_size() : 1);
  const models::LlamaConfig& c = model->config();
  ZENITH_CHECK(c.num_attention_heads % o.tensor_parallel == 0 &&
                   c.num_key_value_heads % o.tensor_parallel == 0,
               "[finetune] --tensor-parallel ", o.tensor_parallel, " does not divide the model's ",
               c.num_attention_heads, " attention heads and ", c.num_key_value_heads,
               " key/value heads");
  ZENITH_CHECK(c.num_hidden_layers >= o.pipeline_parallel, "[finetune] --pipeline-parallel ",
               o.pipeline_parallel, " is more stages than the model's ", c.num_hidden_layers,
               " layers");
  auto run = std::make_unique<distributed::ParallelLlama>(
      std::move(model),
      distributed::ModelParallelOptions{.tensor = int(o.tensor_parallel),
                                        .pipeline = int(o.pipeline_parallel),
                                        .micro_batches = int(o.micro_batches),
                                        .sequence_parallel = o.sequence_parallel,
                                        // --zero: ZeRO reduce-scatters over the data group
                                        .data_gradients = o.zero_stage == 0});
  const distributed::DeviceMesh& mesh = run->mesh();
  const int world_rank = communication::get_rank();
  ranks = Ranks(mesh.data_group(), world_rank == 0);
  params = run->trainable_params();
  // The whole model's blocks, freed now, go back to the system: the allocator's cache would
  // keep them (4Ψ) beside the shards and the optimizer state for the rest of the run.
  core::empty_allocator_cache();
  log(
      format("[finetune] rank %d: tensor %d x pipeline %d x data %d (tensor rank %d, stage %d, "
             "data rank %d)%s, %d micro-batches",
             world_rank, mesh.degree(distributed::MeshDim::tensor),
             mesh.degree(distributed::MeshDim::pipeline), mesh.degree(distributed::MeshDim::data),
             mesh.coord().tensor, mesh.coord().pipeline, mesh.coord().data,
             o.sequence_parallel ? ", sequence parallel" : "", int(o.micro_batches)));
  return run;
}

EvalRecord evaluate_parallel(distributed::ParallelLlama& run, const Data& data, int64_t batch_size,
                             int64_t pad_id, int64_t pad_to, const Ranks& ranks) {
  double total = 0;
  EvalRecord r;
  for (size_t i = size_t(ranks.rank() * batch_size); i < data.examples.size();
       i += size_t(ranks.world() * batch_size)) {
    std::vector<const Example*> part;
    for (size_t j = i; j < std::min(data.examples.size(), i + size_t(batch_size)); ++j)
      part.push_back(&data.examples[j]);
    // Padded on the right: the causal mask keeps the padding out of the learned positions.
    const Batch b = collate(part, pad_id, pad_to);
    if (b.targets == 0) continue;
    total += run.eval_loss(b.input_ids, b.labels) * double(b.targets);
    r.targets += b.targets;
  }
  const std::vector<double> sums = ranks.sum({total, double(r.targets)});
  r.targets = int64_t(sums[1]);
  r.loss = r.targets > 0 ? sums[0] / double(r.targets) : 0;
  r.perplexity = std::exp(r.loss);
  return r;
}

// One process resuming a model-parallel checkpoint: every parameter's whole AdamW slots (and the
// step), assembled from the ranks' pieces in `dir` by their global offsets. trainer_state's copy
// is rank 0's shards only.
static void load_whole_optimizer(const std::string& dir, const std::vector<std::string>& names,
                                 nn::Optimizer& optimizer) {
  const distributed::ShardedCheckpointReader reader(dir);
  nn::StateDict state;
  for (const auto& [key, t] : optimizer.state_dict()) {
    std::string slot;
    size_t i = 0;
    std::string name = "optimizer.step";
    if (key != "step") {
      if (!distributed::split_slot(key, &slot, &i)) continue;
      ZENITH_CHECK(i < names.size(), "[finetune] --resume ", dir, ": optimizer state '", key,
                   "' of ", names.size(), " parameters");
      name = names[i] + "." + slot;
    }
    const Shape want = key == "step" ? Shape{1} : t.shape();
    ZENITH_CHECK(reader.contains(name) && reader.global_shape(name) == want, "[finetune] --resume ",
                 dir, " has no optimizer state '", name, "' of shape ", shape_str(want),
                 reader.contains(name) ? " (it has " + shape_str(reader.global_shape(name)) + ")"
                                       : std::string());
    state[key] = reader.read_full(name).reshape(t.shape());
  }
  optimizer.load_state_dict(state);
}

void load_optimizer_state(const std::string& resume, const TrainerState& state,
                          const distributed::ParallelLlama* run,
                          const std::vector<std::string>& names, nn::Optimizer& optimizer) {
  const std::string dir = resume + "/" + kParallelStateDir;
  if (!run && std::filesystem::exists(dir + "/" + distributed::kShardedMetadataFile))
    return load_whole_optimizer(dir, names, optimizer);
  if (!run) return optimizer.load_state_dict(state.optimizer);
  ZENITH_CHECK(std::filesystem::exists(dir + "/" + distributed::kShardedMetadataFile),
               "[finetune] --resume ", resume,
               " with --tensor-parallel/--pipeline-parallel: it has no ", dir, "/",
               distributed::kShardedMetadataFile,
               " (a checkpoint-<step> directory of a model-parallel zenith finetune run)");
  run->load_optimizer(distributed::ShardedCheckpointReader(dir), optimizer);
}

namespace {

// Full fine-tuning's model.safetensors gathered one tensor at a time (every rank gathers each,
// rank 0 writes it, all drop it before the next), so that no rank holds the whole model; the
// file as io::save_safetensors lays it out (sorted names, float32). False (nothing done, on every
// rank alike) for weights that are not float32 or need several shard files.
bool save_parallel_streamed(distributed::ParallelLlama& run, const Checkpoint& c, int64_t step,
                            const std::string& dir, bool writes) {
  const models::LlamaConfig& config = run.model().config();
  if (c.o.method != Method::full || run.model().weight_dtype() != DType::f32) return false;
  // The whole model's names and shapes, from a shape-only twin (no weight bytes).
  return save_streamed_output(
      c, config, distributed::hollow_llama(config)->hf_state(),
      [&](const std::string& name, const auto& write) { write(run.full_tensor(name)); }, step, dir,
      writes);
}

}  // namespace

void save_parallel(distributed::ParallelLlama& run, const Checkpoint& c, int64_t step,
                   const std::string& dir, bool writes) {
  // Collective: every rank's optimizer shards (a checkpoint), every rank gathers, rank 0 writes.
  // --zero over the data ranks: save_zero_state wrote them.
  const bool zero = c.o.zero_stage > 0 && run.mesh().degree(distributed::MeshDim::data) > 1;
  if (dir != c.o.out && !zero)
    distributed::save_sharded(dir + "/" + kParallelStateDir, run.optimizer_pieces(c.optimizer));
  if (c.o.method == Method::lora) {
    const io::LoraAdapter adapter = run.lora_adapter(c.lora);
    if (!writes) return;
    Checkpoint whole = c;
    whole.adapter = &adapter;
    save_output(whole, step, dir);
    return;
  }
  if (save_parallel_streamed(run, c, step, dir, writes)) return;
  std::map<std::string, Tensor> state = run.full_state();
  if (!writes) return;
  models::Llama model(run.model().config(), std::move(state), "the ranks' shards");
  Checkpoint whole{.model = model,
                   .o = c.o,
                   .lora = c.lora,
                   .optimizer = c.optimizer,
                   .scaler = c.scaler,
                   .ranks = c.ranks,
                   .pad_to = c.pad_to};
  save_output(whole, step, dir);
}

}  // namespace zenith::finetune::detail
