// Batch-invariant kernels: while on (per thread), the CPU linear kernel reduces each output
// element in one fixed order that does not depend on how many rows the product has or how they
// are split over threads (backend/cpu/gemm_rowwise.cpp), so a row's result is bit-identical
// whether it is computed alone or in a batch. The LLM engine's thread turns it on.
#pragma once

namespace zenith::core {

bool batch_invariant();
void set_batch_invariant(bool on);

// Turns the switch on (or off) for this thread while alive, then back.
class BatchInvariantScope {
 public:
  explicit BatchInvariantScope(bool on = true) : saved_(batch_invariant()) {
    set_batch_invariant(on);
  }
  ~BatchInvariantScope() { set_batch_invariant(saved_); }
  BatchInvariantScope(const BatchInvariantScope&) = delete;
  BatchInvariantScope& operator=(const BatchInvariantScope&) = delete;

 private:
  bool saved_;
};

}  // namespace zenith::core
