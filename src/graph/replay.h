// Replay: a graph compiled into a flat array of prepared kernel calls. Each step holds the
// kernel's function pointer (no dispatch, no shape rules, no autograd), its attributes, and
// where each input comes from: a slot (the tensor a value is bound to) used as is, or a view of
// its buffer built from the recorded view. After each step the slots whose last reader it was
// are released, so buffers die as early as the graph allows; with a memory plan
// (memory_plan.h) the buffers of one replay come from one arena.
#pragma once

#include <memory>
#include <vector>

#include "core/allocator.h"
#include "core/dispatch.h"
#include "graph/ir.h"

namespace zenith::graph {

class ArenaPool;
class MemoryPlan;

// The optimizer's per-step hyperparameters, set on the update nodes before each replay.
struct UpdateParams {
  double lr = 0.0;
  int64_t step = 1;  // Adam's 1-based step
};

class Program {
 public:
  explicit Program(const Graph& graph);
  ~Program();

  int segments() const { return segments_; }
  // Binds the step's inputs (same shapes, dtypes and strides as at capture).
  void bind_inputs(const std::vector<Tensor>& inputs);
  void set_update_params(const UpdateParams& p);
  // Runs segment s; returns the tensors it hands to the host code.
  std::vector<Tensor> run_segment(int s);
  // After the last segment: sets the state's gradients and releases every slot.
  void finish();
  // Drops every binding: after an error, or a step that stops before its last segment.
  void reset();

  // Memory planning: the next replay records its allocations; the one after uses the plan, in
  // the pool's arena where one is given (shared with other programs that never replay at the
  // same time).
  void enable_memory_plan(std::shared_ptr<ArenaPool> pool = nullptr);
  const MemoryPlan* memory_plan() const { return plan_.get(); }
  int steps() const { return int(steps_.size()); }

 private:
  struct Arg {
    int32_t slot = -1;  // -1: an undefined input
    int32_t view = -1;  // -1: the slot's tensor itself, else views_[view] over its buffer
  };
  struct Step {
    OpId op;
    dispatch::ErasedKernel kernel = nullptr;
    std::shared_ptr<void> attrs;
    std::vector<Arg> args;
    std::vector<int32_t> outs;     // slot per output, -1: not kept
    std::vector<int32_t> release;  // slots whose last reader this step is
    int segment = 0;
    int32_t overwrites = -1;  // the arg whose buffer output 0 takes over (Node::overwrites)
  };
  Tensor arg_tensor(const Arg& a) const;
  void release_all(bool complete);

  std::vector<Step> steps_;
  std::vector<View> views_;
  std::vector<Tensor> slots_;
  std::vector<Tensor> fixed_;                  // state and constants, by slot (undefined otherwise)
  std::vector<int> input_slot_;                // per step input: its slot (-1: unused)
  std::vector<std::vector<Arg>> outputs_;      // per segment: what it returns
  std::vector<std::pair<Tensor, Arg>> grads_;  // state tensor, its gradient
  std::vector<size_t> segment_begin_;          // first step of each segment (and the end)
  int segments_ = 1;
  std::vector<Tensor> scratch_;  // a step's input tensors, reused
  std::unique_ptr<MemoryPlan> plan_;
};

// The kernel that replays `op` on `device`, or null when there is none (a decomposition ran).
dispatch::ErasedKernel replay_kernel(OpId op, DeviceType device);

}  // namespace zenith::graph
