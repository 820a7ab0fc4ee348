// MindFormers' parallel_config block in a `zenith finetune --config` YAML (at the top or under
// `finetune:`), read as the flags it means:
//   parallel_config:
//     data_parallel: 2       # checked: ranks / (model_parallel x pipeline_stage)
//     model_parallel: 2      # --tensor-parallel
//     pipeline_stage: 1      # --pipeline-parallel
//     micro_batch_num: 1     # --micro-batches
//     use_seq_parallel: false  # --sequence-parallel
//     optimizer_shard: true  # --zero 1 (a `zero` key of the file or --zero wins)
// Other keys of MindFormers' block (expert_parallel, vocab_emb_dp, ...) are refused by name.
#pragma once

#include <string>

#include "zenith/finetune.h"

namespace zenith::cli {

inline constexpr const char* kParallelConfigKey = "parallel_config";

// Applies the block, when the file has one, to `o` (before the file's other keys and the flags,
// which override it). Returns its data_parallel (0 when absent) for check_data_parallel.
int64_t apply_parallel_config(const std::string& path, finetune::Options& o);

// data_parallel x model_parallel x pipeline_stage must be the job's ranks.
void check_data_parallel(int64_t data_parallel, const finetune::Options& o, int ranks);

}  // namespace zenith::cli
