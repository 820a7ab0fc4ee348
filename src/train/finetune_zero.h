// zenith finetune --zero's checkpoints: each rank's rows of every parameter and AdamW slot in
// the checkpoint's zero/ directory (distributed/zero_checkpoint.h: global offsets, metadata
// written last and atomically), beside the unsharded model rank 0 writes as without --zero.
// A --zero run resumes from it on any number of ranks (2 or more) with the same global batch
// (ranks x --batch-size: each step then sees the same examples), at any ZeRO stage.
#pragma once

#include <string>
#include <vector>

#include "distributed/parallelize_llama_train.h"
#include "distributed/zero.h"
#include "distributed/zero_llama.h"
#include "train/finetune_run.h"
#include "zenith/llama.h"

namespace zenith::finetune::detail {

inline constexpr const char* kZeroStateDir = "zero";

// Whether a run builds its model shape-only: --zero 3 of full fine-tuning on several ranks,
// without model parallelism, from a Hugging Face directory (--resume's or --model) or --init
// random.
bool zero3_shape_only(const Options& o, int ranks);
// The model built shape-only (distributed::hollow_llama) and `rows` filled with this rank's rows
// of its weights, read from --resume's or --model's safetensors or, with --init random, drawn as
// Llama(config) would draw them: no rank holds the whole model before its first gather. Hand
// `rows` to ZeroOptions::rows_of through distributed::llama_rows_of.
std::shared_ptr<models::Llama> shape_only_model(const Options& o, int rank, int ranks,
                                                distributed::LlamaRows& rows);
// ZeroOptions::rows_of from shape_only_model's rows (taken from `rows`); unset when it is empty.
std::function<Tensor(size_t, distributed::Chunk)> zero_rows_of(const models::Llama& model,
                                                               distributed::LlamaRows& rows);

// ZeroOptions of a finetune run: the step's losses are weighted by each rank's share of the
// tokens (gradients summed), reduced at step(); with model parallelism (`run`) over its mesh's
// data group, each tensor/pipeline shard being this rank's parameters.
distributed::ZeroOptions zero_options(const Options& o, const distributed::ParallelLlama* run,
                                      std::function<Tensor(size_t, distributed::Chunk)> rows_of);
// How ZeRO counts the gradient norm of `params` (run.trainable_params()) over run's mesh: the
// tensor-split ones summed over the tensor group, the stages summed, a tied embedding once.
distributed::ModelParallelNorm zero_norm_layout(const distributed::ParallelLlama& run,
                                                const std::vector<Tensor>& params);

// o.resume's trainer state for a run on `ranks` ranks: read_trainer_state's checks, except
// that a --zero run may change the rank count and --batch-size when their product stays; a
// checkpoint of a --zero run is refused without --zero and one without zero/ with it (its
// optimizer state is one rank's share, or all of it).
TrainerState read_resume_state(const Options& o, int ranks, int64_t pad_to);

// The model's names of `params`, in their order (ZeRO's parameter order).
std::vector<std::string> parameter_names(const models::Llama& model,
                                         const std::vector<Tensor>& params);

// Collective over zero's group: every rank's shards into dir/zero. With model parallelism
// (`run`), collective over the world: the AdamW rows of every rank's tensor/pipeline blocks into
// dir/parallel, the layout any model-parallel run (with or without --zero) resumes from.
// ZeRO-3 full fine-tuning: the model written as save_output writes it (model.safetensors,
// config.json, side files, rank 0's trainer state) but gathered one parameter at a time, so a
// rank never holds more than its shards and one whole parameter. Collective; rank 0 (`writes`)
// writes. False, having done nothing, where the weights are not all float32 or would be
// sharded over several files (the caller then gathers them all).
bool save_zero3_output(const Checkpoint& c, distributed::ZeroOptimizer& zero, bool writes,
                       int64_t step, const std::string& dir);

// The model state a rank holds at ZeRO `stage` over `ranks` data ranks with AdamW, in bytes, for
// `params` (under tensor/pipeline parallelism this rank's part of the model).
double zero_state_bytes_per_rank(int64_t stage, const std::vector<Tensor>& params, int ranks);

// ZeRO-3's evaluation: evaluate_shared's batches and loss (rank r takes every world-th batch,
// the sums added over `ranks`), each module's parameters gathered around its own forward and
// freed after, as training's forward walks the decoder (distributed::zero3_llama_loss, or
// zero3_lora_loss for LoRA), so a rank holds its shards and one module, never the whole model.
// Collective: a rank with no batch left in a round runs a stand-in that counts for nothing.
// `run`: the model is tensor-parallel (--tensor-parallel, ZeRO over the mesh's data group), its
// loss distributed::zero3_tensor_parallel_llama_loss's.
EvalRecord evaluate_zero3(models::Llama& model,
                          const std::shared_ptr<distributed::ZeroOptimizer>& zero, const Data& data,
                          int64_t batch_size, int64_t pad_id, const Ranks& ranks,
                          const distributed::ParallelLlama* run = nullptr);

void save_zero_state(const std::string& dir, const distributed::ZeroOptimizer& zero,
                     const std::vector<std::string>& names,
                     const distributed::ParallelLlama* run = nullptr);
// This rank's rows of the parameters and AdamW slots from resume/zero (resume/parallel with
// `run`), whatever rank count and stage saved them.
void load_zero_state(const std::string& resume, distributed::ZeroOptimizer& zero,
                     const std::vector<std::string>& names,
                     const distributed::ParallelLlama* run = nullptr);

}  // namespace zenith::finetune::detail
