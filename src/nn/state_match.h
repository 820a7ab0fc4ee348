// Matching a loaded state (a checkpoint's tensors) against the tensors a cell or an optimizer
// holds. Every problem is collected first and reported in one error: one list beats a
// fix-and-rerun loop.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "zenith/nn.h"

namespace zenith::nn::detail {

class StateMatch {
 public:
  // `holder` names our side in messages: "model" or "optimizer".
  StateMatch(const StateDict& state, std::string holder);

  // We hold `name` with `shape`: records it missing from the state or mis-shaped there.
  void expect(const std::string& name, const Shape& shape);
  // Throws one Error headed `title`, listing the missing, unexpected (names in the state that
  // no expect() asked for) and mis-shaped tensors. Missing and unexpected names count only
  // when `strict`; a mis-shaped one always does.
  void check(const std::string& title, bool strict) const;

 private:
  const StateDict& state_;
  std::string holder_;
  std::set<std::string> known_;
  std::vector<std::string> missing_, mismatched_;
};

}  // namespace zenith::nn::detail
