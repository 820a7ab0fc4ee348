// Capture: a training step run eagerly once under a recording observer becomes a Graph. Every op
// the dispatcher runs on the capturing thread inside a phase is recorded with its typed
// attributes and the identities (storage + view) of its inputs and outputs; tensors that no
// recorded op made are the step's inputs, its state (parameters, buffers, optimizer slots) or
// constants. What a graph cannot express ends the capture with a reason (failure()):
//   - a host read of a tensor value (item(), to_vector()) inside a phase: control flow that
//     depends on values (the host code between phases may read them, e.g. the loss). Reads of
//     constants (tensors no op of the step made that are neither inputs nor state, such as
//     rotary tables computed on the host from a model's fixed frequencies and the positions of
//     the input's shape) are kept, as the graph keeps any constant an op reads;
//   - a tensor computed outside the phases read inside one;
//   - an op that returns a view of an existing tensor without declaring the write;
//   - state (a parameter or buffer) replaced instead of updated in place.
#pragma once

#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/dispatch.h"
#include "graph/ir.h"

namespace zenith::graph {

class Recorder {
 public:
  // inputs: bound anew at each replay; state: the same tensors at every replay, by name.
  Recorder(std::vector<Tensor> inputs, std::vector<std::pair<std::string, Tensor>> state);
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // Ops between begin_phase() and end_phase() form one segment; end_phase names the tensors
  // the phase hands to the host code (they must be values of the graph).
  void begin_phase();
  void end_phase(const std::vector<Tensor>& outputs);
  // Stops recording. The graph, with the gradients the step left in its state's .grad, or
  // nothing when the step could not be captured (failure() says why).
  std::optional<Graph> finish();
  const std::string& failure() const { return failure_; }
  bool failed() const { return !failure_.empty(); }

 private:
  static void observe(void* self, const dispatch::OpEvent& event);
  static void host_read(void* self, const Tensor& t);
  // Whether t's value may differ from one replay to the next: a step input, state, or a value
  // some op (of a phase, or between phases) made.
  bool varies(const Tensor& t) const;
  void record(const dispatch::OpEvent& event);
  void fail(std::string reason);
  // The value holding t's storage (new external values for storages seen the first time).
  ValueId value_of(const Tensor& t);
  Operand operand_of(const Tensor& t);

  struct Known {
    ValueId id;
    std::weak_ptr<Storage> alive;  // a freed storage's address may come back for a new one
  };
  Graph graph_;
  std::vector<Tensor> inputs_;
  std::vector<std::pair<std::string, Tensor>> state_;
  std::vector<const Storage*> state_storage_;  // at the start, to find replaced state
  std::unordered_map<const Storage*, Known> known_;
  std::unordered_map<const Storage*, std::weak_ptr<Storage>> outside_;  // made between phases
  std::thread::id thread_ = std::this_thread::get_id();
  int observer_ = 0;
  std::pair<dispatch::HostReadHook, void*> previous_hook_{nullptr, nullptr};
  bool in_phase_ = false;
  bool finished_ = false;
  std::string failure_;
};

}  // namespace zenith::graph
