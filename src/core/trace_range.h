// Named ranges of a training step (the step itself, data wait, forward, backward, optimizer,
// communication wait), marked with TraceRange by whichever layer does the work (src/train for
// the step's phases, src/distributed for its waits), and recorded by a profiler above core that
// installs hooks. Without hooks, a range costs one atomic load.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace zenith::core {

enum class Range : uint8_t { step, data_wait, forward, backward, optimizer, communication_wait };
inline constexpr size_t kRangeCount = 6;

// "step", "data wait", "forward", "backward", "optimizer", "communication wait"
const char* range_name(Range range);

struct RangeHooks {
  void (*begin)(Range range) = nullptr;
  void (*end)(Range range) = nullptr;
};

// Installs `hooks` (null: none). They must outlive every range that began while installed: a
// range ends through the hooks it began with.
void set_range_hooks(const RangeHooks* hooks);

namespace detail {
extern std::atomic<const RangeHooks*> g_range_hooks;
}

// Marks [construction, destruction) as `range` on this thread.
class TraceRange {
 public:
  explicit TraceRange(Range range)
      : range_(range), hooks_(detail::g_range_hooks.load(std::memory_order_acquire)) {
    if (hooks_) hooks_->begin(range_);
  }
  ~TraceRange() {
    if (hooks_) hooks_->end(range_);
  }
  TraceRange(const TraceRange&) = delete;
  TraceRange& operator=(const TraceRange&) = delete;

 private:
  Range range_;
  const RangeHooks* hooks_;
};

}  // namespace zenith::core
