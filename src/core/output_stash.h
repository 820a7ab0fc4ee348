// Selective activation checkpointing's hook into dispatch: while a stash is installed on this
// thread, every op dispatched from outside a kernel goes through it, so it can keep the outputs
// of the ops it selects (a checkpointed layer's first forward) or hand them back instead of
// running those ops again (its recompute in backward). The op's autograd node is recorded by the
// op's function around dispatch either way, so gradients flow as usual.
#pragma once

#include <functional>
#include <vector>

#include "core/op_list.h"
#include "zenith/tensor.h"

namespace zenith::dispatch {

class OutputStash {
 public:
  virtual ~OutputStash() = default;
  // The outputs of `op` on `inputs`: run() (the usual dispatch) or outputs kept earlier. While
  // this runs the stash is uninstalled, so the ops run() dispatches in turn run as usual.
  virtual std::vector<Tensor> call(OpId op, const std::vector<Tensor>& inputs,
                                   const std::function<std::vector<Tensor>()>& run) = 0;
};

// Installs `stash` on this thread while alive (null: none); the previous one comes back after.
class StashScope {
 public:
  explicit StashScope(OutputStash* stash);
  ~StashScope();
  StashScope(const StashScope&) = delete;
  StashScope& operator=(const StashScope&) = delete;

 private:
  OutputStash* previous_;
};

}  // namespace zenith::dispatch
