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
struct Node {
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
// Capture outputs in `backward` only as out.detach(), never the output itself (cycle).
void record(const std::string& op, const std::vector<Tensor>& inputs,
            const std::vector<Tensor>& outputs, BackwardFn backward);

// Runs the backward pass from `roots` with their gradients.
void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads,
              bool retain_graph = false);

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
