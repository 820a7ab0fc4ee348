// ZeRO state as a sharded checkpoint (distributed/sharded_checkpoint.h): each rank saves its
// rows of every parameter and of every optimizer slot, so a checkpoint saved by N ranks at one
// stage loads on M ranks at any stage, or in one process.
//   "<name>"             the parameter, rows [offset, offset + rows) on each rank
//   "<name>.<slot>"      optimizer slot rows (AdamW "exp_avg", "exp_avg_sq"; Momentum "moments")
//   "optimizer.step"     the optimizer's step count, [1] int64
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "distributed/sharded_checkpoint.h"
#include "distributed/zero.h"

namespace zenith::distributed {

// Optimizer state names are "<slot>.<index>"; false for the others ("step").
bool split_slot(const std::string& key, std::string* slot, size_t* index);
// This rank's optimizer state pieces: "optimizer.step", and each slot of ZeRO parameter i as
// `parameter(i)` (its name, global shape and this rank's row offset) renamed "<name>.<slot>",
// holding this rank's rows of that slot.
std::vector<ShardedTensor> zero_optimizer_pieces(
    const ZeroOptimizer& zero, const std::function<ShardedTensor(size_t)>& parameter);
// This rank's pieces; `names` are the parameters' names, in the ZeroOptimizer's order.
std::vector<ShardedTensor> zero_state_pieces(const ZeroOptimizer& zero,
                                             const std::vector<std::string>& names);
// Collective over zero.group().
void save_zero_checkpoint(const std::string& dir, const ZeroOptimizer& zero,
                          const std::vector<std::string>& names);
// Loads this rank's rows (and, for stages 1 and 2, the whole parameters) and optimizer state,
// whatever layout saved them. No communication.
void load_zero_checkpoint(const std::string& dir, ZeroOptimizer& zero,
                          const std::vector<std::string>& names);

}  // namespace zenith::distributed
