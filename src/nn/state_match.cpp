#include "nn/state_match.h"

#include <sstream>

#include "zenith/error.h"

namespace zenith::nn::detail {

namespace {

std::string shape_or_undefined(const Tensor& t) {
  return t.defined() ? shape_str(t.shape()) : "undefined";
}

}  // namespace

StateMatch::StateMatch(const StateDict& state, std::string holder)
    : state_(state), holder_(std::move(holder)) {}

void StateMatch::expect(const std::string& name, const Shape& shape) {
  known_.insert(name);
  auto it = state_.find(name);
  if (it == state_.end())
    missing_.push_back(name + " " + shape_str(shape));
  else if (!it->second.defined() || it->second.shape() != shape)
    mismatched_.push_back(name + ": checkpoint " + shape_or_undefined(it->second) + ", " + holder_ +
                          " " + shape_str(shape));
}

void StateMatch::check(const std::string& title, bool strict) const {
  std::vector<std::string> unexpected;
  for (auto& [name, t] : state_)
    if (!known_.count(name)) unexpected.push_back(name + " " + shape_or_undefined(t));
  if (mismatched_.empty() && (!strict || (missing_.empty() && unexpected.empty()))) return;
  std::ostringstream os;
  os << title;
  auto list = [&](const char* what, const std::vector<std::string>& items) {
    if (items.empty()) return;
    os << "\n  " << what << " (" << items.size() << "):";
    for (auto& i : items) os << "\n    " << i;
  };
  list("missing", missing_);
  list("unexpected", unexpected);
  list("mis-shaped", mismatched_);
  throw Error(os.str());
}

}  // namespace zenith::nn::detail
