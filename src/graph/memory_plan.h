// Memory planning for replays: one replay records every buffer its segments allocate and free
// (core's allocation observer), giving each buffer a live range in allocation events; the
// buffers that die within the replay are then packed into one arena by their live ranges
// (best fit, largest first: a buffer takes the smallest gap left between the buffers it
// overlaps in time, at the lowest offset). Later replays are served from the arena in the same
// order (core's arena plan): no allocator calls, no page faults, and memory shared by buffers
// that are never alive together. A buffer that outlives the replay (the loss, a gradient) is
// planned as alive until the replay's end: it shares memory with activations that died before
// it was made, and stays valid until the next replay of the same graph, which reuses its place
// (as CUDA graphs' static outputs; clone() what must live longer; the trainer frees the
// gradients before each step). An arena freed while such buffers are held goes with the last
// of them (core's allocator counts its blocks). Replays are deterministic, so the order repeats; if
// it ever does not (diverged), the plan is dropped and the allocator serves the rest. A replay
// that stops early (a step the trainer rejects, an error) is no divergence: it keeps the plan.
// The plans of one step compiler's graphs share one arena (ArenaPool): only one replays at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/allocator.h"

namespace zenith::graph {

// A buffer of the recorded replay: [alloc, free) in events; free < 0 when it outlived it.
struct PlannedBuffer {
  size_t size = 0;
  int64_t alloc = 0, free = -1;
  int64_t offset = -1;  // in the arena, -1 when not planned
  // An earlier buffer whose place this one takes: a kernel wrote it over that one, which died
  // at the same op (Node::overwrites); -1: none.
  int64_t over = -1;
};

// Best fit (largest first, or longest-lived or size x lifetime first where that packs tighter):
// assigns offsets to the buffers with free >= 0; returns the arena
// size. Two buffers whose ranges overlap never overlap in memory, except a buffer and the one
// it is written over (`over`, no larger), which share their offset.
size_t pack_buffers(std::vector<PlannedBuffer>& buffers, size_t align = 64);
// The most bytes of planned buffers alive at once (the lower bound of any packing).
size_t peak_live_bytes(const std::vector<PlannedBuffer>& buffers);

// One arena for the memory plans of several graphs that never replay at the same time (a step
// compiler's graphs, one per input shape), as CUDA graph trees share one memory pool: it holds
// the largest plan's arena instead of one arena per cached graph. A plan takes the arena for a
// replay when it is large enough and no buffer another plan's replay left in it (an output) is
// still held; otherwise the pool allocates a new one (at least as large) and the old one goes
// with its last held buffer. A plan's own outputs are valid until its next replay, as before.
class ArenaPool {
 public:
  ArenaPool() = default;
  ~ArenaPool();
  ArenaPool(const ArenaPool&) = delete;
  ArenaPool& operator=(const ArenaPool&) = delete;

  // The arena for a replay of `plan` (any identity) that needs `bytes`; null while another
  // plan's replay holds it (the caller uses an arena of its own).
  char* acquire(size_t bytes, const void* plan);
  void release(const void* plan);
  // Frees the arena while no replay is in it and none of its buffers is held (before an eager
  // capture, whose unfused step needs more memory than a replay); the next acquire allocates
  // one again.
  void trim();
  size_t bytes() const { return bytes_; }
  // Arenas allocated so far, and of them those allocated because another plan's outputs were
  // still held in the one before.
  int64_t allocations() const { return allocations_; }
  int64_t allocations_for_held() const { return for_held_; }

 private:
  char* arena_ = nullptr;
  size_t bytes_ = 0;
  const void* last_ = nullptr;  // the plan that replayed last in it
  const void* busy_ = nullptr;  // the plan replaying now
  int64_t allocations_ = 0, for_held_ = 0;
};

class MemoryPlan {
 public:
  // pool: the arena shared with other plans (null: an arena of its own).
  explicit MemoryPlan(std::shared_ptr<ArenaPool> pool = nullptr) : pool_(std::move(pool)) {}
  ~MemoryPlan();
  MemoryPlan(const MemoryPlan&) = delete;
  MemoryPlan& operator=(const MemoryPlan&) = delete;

  // Around one replay: the first records, the next ones use the arena. complete: the replay ran
  // to its end (one that stopped early neither records nor checks the plan).
  void start_replay();
  void end_replay(bool complete = true);
  // While recording: the kernel that just ran wrote its output (buffer at `out`) over its input
  // (at `in`), which died at the same op; the plan gives both one place. Ignored otherwise, or
  // when `in` is not a buffer that died after `out` was made.
  void note_overwrite(const void* in, const void* out);
  bool recording() const { return phase_ == Phase::kRecording && in_replay_; }
  // Around each segment of it, on the replaying thread.
  class Scope {
   public:
    explicit Scope(MemoryPlan* plan);
    ~Scope();

   private:
    MemoryPlan* plan_;
  };

  bool ready() const { return phase_ == Phase::kUsing; }
  bool diverged() const { return dropped_; }
  size_t arena_bytes() const { return arena_bytes_; }
  size_t recorded_peak_bytes() const { return peak_; }  // planned buffers alive at once
  size_t planned_buffers() const { return planned_; }
  size_t overwritten_buffers() const { return overwritten_; }  // placed over another
  size_t unplanned_buffers() const { return buffers_.size() - planned_; }

 private:
  static void on_alloc(void* self, void* p, size_t nbytes);
  static void on_free(void* self, void* p);
  void build();
  void drop();

  enum class Phase { kIdle, kRecording, kRecorded, kUsing } phase_ = Phase::kIdle;
  bool in_replay_ = false;
  bool dropped_ = false;
  std::vector<PlannedBuffer> buffers_;
  std::vector<const void*> pointers_;           // recording: each buffer's address
  std::vector<std::pair<void*, size_t>> open_;  // recording: pointer -> buffer index
  int64_t events_ = 0;
  core::AllocationObserver observer_;
  core::ArenaPlan plan_;
  std::shared_ptr<ArenaPool> pool_;
  bool pooled_ = false;    // this replay's arena is the pool's
  char* arena_ = nullptr;  // an arena of its own (no pool, or the pool's was busy)
  size_t arena_bytes_ = 0, peak_ = 0, planned_ = 0, overwritten_ = 0;
};

}  // namespace zenith::graph
