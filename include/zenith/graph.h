// Graph mode (context::GRAPH_MODE): a training step captured once per input signature as a
// graph of the ops it dispatched (forward, loss, backward and optimizer update: one joint graph,
// as AOTAutograd captures it), optimized by passes (constant folding, CSE, layout conversions,
// in-place reuse, Conv/BatchNorm+ReLU, elementwise and optimizer fusion, dead-op elimination),
// planned into one memory arena, and replayed as a flat array of prepared kernel calls.
//
//   graph::StepCompiler compiler(state, optimizer.get());
//   graph::StepRun run = compiler.begin({x, labels});           // capture or replay
//   Tensor loss = run.phase([&] { return std::vector<Tensor>{loss_fn(net(x), labels)}; })[0];
//   double value = loss.item();                                 // host code between phases
//   run.phase([&] { loss.backward(); return std::vector<Tensor>{}; });
//   run.phase([&] { optimizer->step(); return std::vector<Tensor>{}; });
//   run.finish();
//
// The step's code runs eagerly on the first call of each signature (capture); later calls skip
// it and replay. The code between phases runs every time: it may read the tensors a phase
// returns (the NaN check reads the loss). A step that cannot be captured (a host read of a value
// inside a phase, i.e. data-dependent control flow; see graph/capture.h) runs eagerly, its
// reason logged once. The step's code must be a function of the input shapes and the state
// tensors: what else it reads (the step count, a Python value) is frozen at capture, except the
// optimizer's learning rate and Adam's step, which every replay refreshes.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "zenith/optim.h"
#include "zenith/tensor.h"

namespace zenith::graph {

// What one capture produced: the seed's log line and the figures metrics.jsonl records.
// Intermediates alive at a graph's activation peak that one op made in one role ("saved for
// backward", "parameter gradient", "activation gradient or temporary", "forward temporary",
// "step output").
struct LiveGroup {
  std::string op, role;
  size_t bytes = 0;
  int buffers = 0;
};

struct CaptureReport {
  int ops = 0;                         // captured
  int ops_after = 0;                   // after the passes
  std::map<std::string, int> fusions;  // fused groups by kind
  int dead = 0, common = 0, constants = 0, layouts = 0, in_place = 0;
  int overwrites = 0;             // outputs written over an input that dies at their op
  int updates_in_backward = 0;    // optimizer update nodes run inside the backward
  size_t activations_before = 0;  // peak bytes of intermediates, captured graph in eager order
  size_t activations_after = 0;   // the same after the passes
  double capture_ms = 0, compile_ms = 0;
  // What is alive at the peak after the passes (largest first), and the op where it is reached.
  std::vector<LiveGroup> live_at_peak;
  std::string peak_op;
  // "graph: 344 ops -> 151 after fusion (bn+relu 9, elementwise 16, ...); activations 76 MB ->
  // 60 MB"
  std::string line() const;
  // The figures as (name, value) pairs: graph/ops, graph/ops_after_fusion, ...
  std::map<std::string, double> scalars() const;
};

struct Options {
  size_t max_graphs = 8;  // compiled signatures kept (least recently used goes)
  bool fuse = true;       // the fusion passes
  // Memory planned per graph from its first replay, in one arena the graphs share (only one
  // replays at a time; sized to the largest plan). The tensors a replay hands out (the loss, the
  // gradients) live in it until the next replay of that graph: clone() to keep them. (Another
  // graph's replay while they are held takes a new arena and leaves them be.)
  bool plan_memory = true;
  // Optimizer in the backward (torchtune's optimizer_in_bwd): a parameter's update runs as soon
  // as its gradient is final and its buffer is reused, where that lowers the replay's peak
  // memory (the others run after the backward, in one pass); replays then leave no gradients
  // in .grad. Only for steps whose host code runs every phase (no skipped update, no gradient
  // read between backward and update).
  bool update_in_backward = false;
  // Where capture lines and fallback reasons go (default: stdout).
  std::function<void(const std::string&)> log;
};

class StepCompiler;
class Compiled;
class ArenaPool;

// One step: a capture (the phases run eagerly under the recorder), a replay, or an eager run
// (a signature that could not be captured).
class StepRun {
 public:
  StepRun(StepRun&&) noexcept;
  StepRun& operator=(StepRun&&) noexcept;
  ~StepRun();
  // Runs the next phase: fn itself (capture, eager) or its replay; returns what fn returned
  // (the replayed tensors on a replay).
  std::vector<Tensor> phase(const std::function<std::vector<Tensor>()>& fn);
  // Ends the step: a capture is compiled; a replay sets the gradients it computed and advances
  // the optimizer's step count as step() would have.
  void finish();
  bool replaying() const;
  bool capturing() const;
  // A run without a compiler: every phase runs eagerly (mode PYNATIVE).
  static StepRun eager();

 private:
  friend class StepCompiler;
  struct State;
  explicit StepRun(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

// A model's training steps in graph mode: compiled graphs by input signature.
class StepCompiler {
 public:
  // state: every tensor the step reads that outlives it (parameters, buffers, optimizer slots),
  // by name; optimizer: whose learning rate and step count replays follow (may be null).
  StepCompiler(std::vector<std::pair<std::string, Tensor>> state, nn::Optimizer* optimizer,
               Options options = {});
  ~StepCompiler();
  StepCompiler(const StepCompiler&) = delete;
  StepCompiler& operator=(const StepCompiler&) = delete;

  // Starts a step over `inputs` (the batch tensors); `tag` adds to the signature what the
  // tensors do not show (e.g. "train").
  StepRun begin(const std::vector<Tensor>& inputs, const std::string& tag = "");

  int captures() const { return captures_; }
  // Captures of a signature whose graph the cache had dropped (more shapes than max_graphs);
  // the first is logged.
  int recaptures() const { return recaptures_; }
  int replays() const { return replays_; }
  int eager_steps() const { return eager_steps_; }
  size_t cached() const;
  // The report of the latest capture (null before one), and taken once by the trainer.
  const CaptureReport* last_capture() const { return last_.get(); }
  std::unique_ptr<CaptureReport> take_new_capture() { return std::move(new_); }
  // Bytes of the memory arena the graphs share: the largest plan's (0 before a plan exists).
  size_t arena_bytes() const;
  // Arenas allocated so far: one, and another each time a larger plan or held outputs of
  // another graph's replay need it.
  int64_t arena_allocations() const;
  // The most bytes its planned buffers hold at once (the arena's lower bound; 0 before).
  size_t planned_peak_bytes() const;
  // Why the last signature that could not be captured runs eagerly ("" when none).
  const std::string& fallback_reason() const { return fallback_; }

 private:
  friend class StepRun;
  void log(const std::string& line) const;
  std::vector<std::pair<std::string, Tensor>> state_;
  nn::Optimizer* optimizer_;
  Options options_;
  std::vector<std::pair<std::string, std::shared_ptr<Compiled>>> cache_;  // most recent last
  std::shared_ptr<Compiled> last_used_;
  std::unique_ptr<CaptureReport> last_, new_;
  std::string fallback_;
  std::unordered_set<std::string> evicted_;  // signatures the cache dropped
  std::shared_ptr<ArenaPool> arenas_;        // the graphs' memory plans share its arena
  int captures_ = 0, recaptures_ = 0, replays_ = 0, eager_steps_ = 0;
  bool held_logged_ = false;  // a replay took a new arena for held outputs (logged once)
};

}  // namespace zenith::graph
