// Define-by-run autograd: ops record Nodes on a tape as they run; backward() walks it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "zenith/tensor.h"

namespace zenith::autograd {

struct Edge {
  std::shared_ptr<struct Node> fn;  // null: the input needs no gradient
  uint32_t input_nr = 0;
};

// One recorded op: maps gradients of its outputs to gradients of its inputs.
struct Node : std::enable_shared_from_this<Node> {
  virtual ~Node() = default;
  // grads[i] is the gradient of output i (undefined when that output got none).
  virtual std::vector<Tensor> apply(const std::vector<Tensor>& grads) = 0;
  // Frees saved tensors after backward (unless the graph is retained).
  virtual void release() {}
  virtual std::string name() const = 0;
  std::vector<Edge> next;  // one per differentiable input
  uint32_t num_outputs = 1;
};

using BackwardFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& grads)>;

// True when grad mode is on and some input requires a gradient.
bool needs_grad(std::initializer_list<Tensor> inputs);
bool needs_grad(const std::vector<Tensor>& inputs);

// Records `op` with `inputs` -> `outputs`: marks the outputs as requiring grad and attaches a
// node that calls `backward`, which returns one gradient per input (undefined = none).
// `backward` is written with ops, so that a create_graph backward records it in turn. It may
// capture the inputs themselves; it captures an output only as a SavedOutput, never the output
// itself (a cycle: the output owns the node).
void record(const std::string& op, const std::vector<Tensor>& inputs,
            const std::vector<Tensor>& outputs, BackwardFn backward);

// An op's own output kept for its backward: the data without the history (no cycle), attached
// again to the op's node when get() runs inside that node's backward with grad mode on (a
// create_graph backward), so the gradient can be differentiated through it.
class SavedOutput {
 public:
  SavedOutput() = default;
  explicit SavedOutput(const Tensor& output, uint32_t output_nr = 0)
      : data_(output.detach()), output_nr_(output_nr) {}
  Tensor get() const;
  bool defined() const { return data_.defined(); }

 private:
  Tensor data_;
  uint32_t output_nr_ = 0;
};

// Runs the backward pass from `roots` with their gradients, accumulating into the leaves'
// grad(). create_graph: the backward ops are recorded too (grad mode stays on), so the
// gradients have a history of their own; it implies retain_graph.
void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads,
              bool retain_graph = false, bool create_graph = false);

// The gradients of `outputs` with respect to `inputs` (PyTorch's torch.autograd.grad), returned
// instead of accumulated: no grad() is touched. grad_outputs defaults to ones for scalar
// outputs; an input the outputs do not depend on gets an undefined tensor. create_graph
// records the backward so the results can be differentiated again (second derivatives).
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool create_graph = false);

bool grad_enabled();
void set_grad_enabled(bool enabled);

// Calls hook(leaf) each time backward() has accumulated a gradient into leaf.grad() (after the
// sum), on the thread running backward. Hooks live until the returned handle is destroyed. Used
// by DistributedDataParallel to start a bucket's all-reduce as soon as its gradients exist.
using GradAccumulatedHook = std::function<void(const Tensor& leaf)>;
class HookHandle {
 public:
  HookHandle() = default;
  explicit HookHandle(uint64_t id) : id_(id) {}
  ~HookHandle() { remove(); }
  HookHandle(HookHandle&& o) noexcept : id_(o.id_) { o.id_ = 0; }
  HookHandle& operator=(HookHandle&& o) noexcept;
  HookHandle(const HookHandle&) = delete;
  HookHandle& operator=(const HookHandle&) = delete;
  void remove();

 private:
  uint64_t id_ = 0;
};
HookHandle register_grad_accumulated_hook(const Tensor& leaf, GradAccumulatedHook hook);

// Runs `fn` once when the backward() in progress on this thread has visited every node
// (PyTorch's queue_callback). Only valid inside a hook or node running during backward().
void queue_callback(std::function<void()> fn);

// Disables recording while alive (like torch.no_grad()).
class NoGradGuard {
 public:
  NoGradGuard() : previous_(grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace zenith::autograd

namespace zenith {
using NoGradGuard = autograd::NoGradGuard;
}
