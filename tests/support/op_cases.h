// The op-check table: for every op of the list (src/core/ops.def), test cases that exercise it
// through the public ops, with the ops each case dispatches (forward and gradient). The list
// test (tests/ops/op_list_test.cpp) fails for an op that no case covers, for a case that does
// not dispatch what it claims, and checks every case against float64 and finite differences;
// it also compares every fused gradient kernel with the decomposition it must equal. A later
// backend is checked against the CPU with the same table (ggml's test-backend-ops).
#pragma once

#include <string>
#include <vector>

#include "core/op_list.h"
#include "support/op_check.h"

namespace zenith::testing {

struct OpCase {
  // What a case is checked for: kGradient: float32 forward against float64, and gradients
  // against finite differences; kForward: the forward only; kRun: runs (forward, and backward
  // when an input requires grad) without a numeric check (random or in-place ops).
  enum Check { kGradient, kForward, kRun };

  std::string name;
  std::vector<OpId> covers;    // ops the case dispatches
  OpFn fn;                     // calls the public ops
  std::vector<Tensor> inputs;  // float64 unless the case needs another dtype
  Check check = kGradient;
  double rtol = 1e-4, atol = 1e-5;  // of the float32 forward
};

// The table, built once (inputs drawn from a fixed seed).
const std::vector<OpCase>& op_cases();

}  // namespace zenith::testing
