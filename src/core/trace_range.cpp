#include "core/trace_range.h"

namespace zenith::core {

namespace detail {
std::atomic<const RangeHooks*> g_range_hooks{nullptr};
thread_local int* t_first_range = nullptr;
}  // namespace detail

const char* range_name(Range range) {
  switch (range) {
    case Range::step:
      return "step";
    case Range::data_wait:
      return "data wait";
    case Range::forward:
      return "forward";
    case Range::backward:
      return "backward";
    case Range::optimizer:
      return "optimizer";
    case Range::communication_wait:
      return "communication wait";
  }
  return "?";
}

void set_range_hooks(const RangeHooks* hooks) {
  detail::g_range_hooks.store(hooks, std::memory_order_release);
}

}  // namespace zenith::core
