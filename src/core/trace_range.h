// Named ranges of a training step (the step itself, data wait, forward, backward, optimizer,
// communication wait), marked with TraceRange by whichever layer does the work (src/train for
// the step's phases, src/distributed for its waits), and recorded by a profiler above core that
// installs hooks. Without hooks, a range costs one atomic load and a thread-local one. Graph
// mode's replays, which skip the step's code and so its ranges, mark each phase as the range
// its capture began first (graph/step.cpp).
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
// While graph mode captures a phase on this thread: where the first range begun in it is noted
// (-1 until one begins), so that the phase's replays are marked as that range.
extern thread_local int* t_first_range;
}  // namespace detail

// Notes the first range begun on this thread while it lives (graph mode's capture of a phase).
class FirstRangeWatch {
 public:
  FirstRangeWatch() : outer_(detail::t_first_range) { detail::t_first_range = &first_; }
  ~FirstRangeWatch() { detail::t_first_range = outer_; }
  FirstRangeWatch(const FirstRangeWatch&) = delete;
  FirstRangeWatch& operator=(const FirstRangeWatch&) = delete;
  // The range's value, -1 where none began.
  int first() const { return first_; }

 private:
  int first_ = -1;
  int* outer_;
};

// Marks [construction, destruction) as `range` on this thread.
class TraceRange {
 public:
  explicit TraceRange(Range range)
      : range_(range), hooks_(detail::g_range_hooks.load(std::memory_order_acquire)) {
    if (hooks_) hooks_->begin(range_);
    if (int* first = detail::t_first_range; first && *first < 0) *first = int(range_);
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
