// Data-parallel equivalence on files: the model parameters of two training checkpoints agree
// to a relative tolerance (`zenith train --nproc N` or a multi-node job against one process
// with the combined batch).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "zenith/io.h"

namespace zenith::testing {

// Every parameter of checkpoint `a` (optimizer state aside) is in `b` with the same size and a
// largest difference below `tolerance` times its largest magnitude; `expected` of them.
inline ::testing::AssertionResult same_parameters(const std::string& a_path,
                                                  const std::string& b_path, double tolerance,
                                                  int expected) {
  const auto a = io::load_safetensors(a_path);
  const auto b = io::load_safetensors(b_path);
  int compared = 0;
  for (const auto& [name, t] : a) {
    if (name.rfind("optimizer.", 0) == 0) continue;
    if (!b.count(name)) return ::testing::AssertionFailure() << name << " missing from " << b_path;
    const auto x = t.to_double_vector(), y = b.at(name).to_double_vector();
    if (x.size() != y.size())
      return ::testing::AssertionFailure() << name << ": " << x.size() << " vs " << y.size();
    double diff = 0, scale = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      diff = std::max(diff, std::fabs(x[i] - y[i]));
      scale = std::max(scale, std::fabs(x[i]));
    }
    if (!(diff / scale < tolerance))
      return ::testing::AssertionFailure()
             << name << ": relative difference " << diff / scale << " >= " << tolerance;
    ++compared;
  }
  if (compared != expected)
    return ::testing::AssertionFailure() << compared << " parameters, expected " << expected;
  return ::testing::AssertionSuccess();
}

}  // namespace zenith::testing
