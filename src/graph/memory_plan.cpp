#include "graph/memory_plan.h"

#include <algorithm>
#include <cstdio>
#include <functional>

#include "zenith/error.h"

namespace zenith::graph {

namespace {

// Buffers written over another form one group, placed once: its root (the first buffer), its
// largest size and the range from the root's allocation to the last member's free.
struct Group {
  size_t root = 0, size = 0;
  int64_t alloc = 0, free = -1;
};

// Per buffer its group's index in `groups` (-1 when not planned).
std::vector<int64_t> group_buffers(const std::vector<PlannedBuffer>& buffers,
                                   std::vector<Group>& groups) {
  std::vector<int64_t> of(buffers.size(), -1);
  groups.clear();
  for (size_t i = 0; i < buffers.size(); ++i) {
    const PlannedBuffer& b = buffers[i];
    if (b.free < 0) continue;
    const int64_t o = b.over;
    if (o >= 0 && size_t(o) < i && of[size_t(o)] >= 0 && b.size <= buffers[size_t(o)].size) {
      Group& g = groups[size_t(of[size_t(o)])];
      g.free = std::max(g.free, b.free);
      of[i] = of[size_t(o)];
      continue;
    }
    of[i] = int64_t(groups.size());
    groups.push_back({i, b.size, b.alloc, b.free});
  }
  return of;
}

}  // namespace

namespace {

// Greedy best fit of the groups in `order`: each at the lowest offset whose gap among the groups
// already placed and alive at the same time fits it best. -> the arena size; offsets per group.
size_t place_groups(const std::vector<Group>& groups, const std::vector<size_t>& order,
                    size_t align, std::vector<int64_t>& offset) {
  auto rounded = [&](size_t n) { return (n + align - 1) / align * align; };
  std::vector<size_t> placed;
  offset.assign(groups.size(), -1);
  size_t arena = 0;
  for (size_t i : order) {
    const Group& b = groups[i];
    const size_t size = rounded(b.size);
    // The placed groups alive at the same time as b, by offset.
    std::vector<std::pair<size_t, size_t>> busy;
    for (size_t j : placed) {
      const Group& o = groups[j];
      if (o.alloc < b.free && b.alloc < o.free)
        busy.push_back({size_t(offset[j]), rounded(o.size)});
    }
    std::sort(busy.begin(), busy.end());
    size_t best = SIZE_MAX, best_gap = SIZE_MAX, cursor = 0;
    for (auto& [off, sz] : busy) {
      if (off > cursor && off - cursor >= size && off - cursor < best_gap) {
        best = cursor;
        best_gap = off - cursor;
      }
      cursor = std::max(cursor, off + sz);
    }
    if (best == SIZE_MAX) best = cursor;  // after everything alive at the same time
    offset[i] = int64_t(best);
    arena = std::max(arena, best + size);
    placed.push_back(i);
  }
  return arena;
}

}  // namespace

size_t pack_buffers(std::vector<PlannedBuffer>& buffers, size_t align) {
  std::vector<Group> groups;
  const std::vector<int64_t> of = group_buffers(buffers, groups);
  // Greedy placement in three orders, the smallest arena kept (the first on ties, so the plan is
  // reproducible): largest first, longest-lived first, and by size x lifetime. Largest first
  // alone can leave a gap no later buffer fits (SeedCNN's step: 16% above the peak).
  auto life = [&](size_t i) { return double(groups[i].free - groups[i].alloc); };
  const std::vector<std::function<double(size_t)>> keys = {
      [&](size_t i) { return double(groups[i].size); }, life,
      [&](size_t i) { return double(groups[i].size) * life(i); }};
  size_t arena = SIZE_MAX;
  std::vector<int64_t> offset, candidate;
  for (const auto& key : keys) {
    std::vector<size_t> order(groups.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    // Ties by allocation order.
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return key(a) > key(b); });
    const size_t size = place_groups(groups, order, align, candidate);
    if (size < arena) {
      arena = size;
      offset = candidate;
    }
  }
  if (groups.empty()) arena = 0;
  for (size_t i = 0; i < buffers.size(); ++i)
    buffers[i].offset = of[i] < 0 ? -1 : offset[size_t(of[i])];
  return arena;
}

size_t peak_live_bytes(const std::vector<PlannedBuffer>& buffers) {
  std::vector<Group> groups;
  group_buffers(buffers, groups);
  std::vector<std::pair<int64_t, int64_t>> events;  // (time, +size / -size)
  for (const auto& g : groups) {
    events.push_back({g.alloc, int64_t(g.size)});
    events.push_back({g.free, -int64_t(g.size)});
  }
  std::sort(events.begin(), events.end());  // a free at t comes before an allocation at t
  int64_t live = 0, peak = 0;
  for (auto& [t, d] : events) {
    live += d;
    peak = std::max(peak, live);
  }
  return size_t(peak);
}

ArenaPool::~ArenaPool() {
  if (arena_) core::arena_free(arena_);
}

char* ArenaPool::acquire(size_t bytes, const void* plan) {
  if (busy_) return nullptr;
  // Outputs of another plan's replay still held (a loss kept, say) would be overwritten.
  const bool held = arena_ && last_ != plan && core::arena_held_blocks(arena_) > 0;
  if (!arena_ || bytes_ < bytes || held) {
    const size_t size = std::max(bytes, bytes_);
    if (arena_) core::arena_free(arena_);  // goes with its last held buffer
    arena_ = nullptr;
    // The allocator's cache holds the blocks of the replay that recorded the plan (and of the
    // eager capture before it): the arena takes their place in every replay after.
    core::empty_allocator_cache();
    arena_ = static_cast<char*>(core::arena_allocate(size));
    bytes_ = size;
    allocations_ += 1;
    for_held_ += held;
  }
  busy_ = last_ = plan;
  return arena_;
}

void ArenaPool::release(const void* plan) {
  if (busy_ == plan) busy_ = nullptr;
}

void ArenaPool::trim() {
  if (!arena_ || busy_ || core::arena_held_blocks(arena_) > 0) return;
  core::arena_free(arena_);
  arena_ = nullptr;
  last_ = nullptr;
}

MemoryPlan::~MemoryPlan() {
  if (arena_) core::arena_free(arena_);
}

void MemoryPlan::on_alloc(void* self, void* p, size_t nbytes) {
  auto* m = static_cast<MemoryPlan*>(self);
  m->open_.push_back({p, m->buffers_.size()});
  m->pointers_.push_back(p);
  m->buffers_.push_back({nbytes, m->events_++, -1, -1});
}

void MemoryPlan::on_free(void* self, void* p) {
  auto* m = static_cast<MemoryPlan*>(self);
  for (size_t i = m->open_.size(); i-- > 0;)
    if (m->open_[i].first == p) {
      m->buffers_[m->open_[i].second].free = m->events_++;
      m->open_.erase(m->open_.begin() + int64_t(i));
      return;
    }
}

void MemoryPlan::note_overwrite(const void* in, const void* out) {
  if (!recording() || !in || !out || in == out) return;
  int64_t bi = -1, bo = -1;
  for (size_t i = pointers_.size(); i-- > 0 && (bi < 0 || bo < 0);) {
    if (bo < 0 && pointers_[i] == out && buffers_[i].free < 0) bo = int64_t(i);
    if (bi < 0 && pointers_[i] == in) bi = int64_t(i);
  }
  // The input must have died (freed) after the output was made, and be no smaller.
  if (bi < 0 || bo < 0 || bi > bo) return;
  const PlannedBuffer &i = buffers_[size_t(bi)], &o = buffers_[size_t(bo)];
  if (i.free < o.alloc || o.size > i.size) return;
  buffers_[size_t(bo)].over = bi;
}

void MemoryPlan::start_replay() {
  in_replay_ = true;
  if (phase_ == Phase::kIdle && !dropped_) {
    phase_ = Phase::kRecording;
    buffers_.clear();
    pointers_.clear();
    open_.clear();
    events_ = 0;
    observer_ = {&MemoryPlan::on_alloc, &MemoryPlan::on_free, this};
  }
  if (phase_ == Phase::kUsing) {
    plan_.next = 0;
    plan_.diverged = false;
    pooled_ = false;
    plan_.base = pool_ ? pool_->acquire(arena_bytes_, this) : nullptr;
    pooled_ = plan_.base != nullptr;
    if (!pooled_) {
      if (!arena_) arena_ = static_cast<char*>(core::arena_allocate(arena_bytes_));
      plan_.base = arena_;
    }
  }
}

void MemoryPlan::end_replay(bool complete) {
  in_replay_ = false;
  if (pooled_) pool_->release(this);
  pooled_ = false;
  if (phase_ == Phase::kRecording) {
    if (complete) {
      build();
    } else {  // what was recorded is part of the replay: record the next one
      phase_ = Phase::kIdle;
      observer_ = {};
    }
  } else if (phase_ == Phase::kUsing &&
             (plan_.diverged || (complete && plan_.next != plan_.sizes.size()))) {
    std::fprintf(stderr,
                 "graph: the replay's allocations no longer follow its memory plan; "
                 "using the allocator\n");
    drop();
  }
}

void MemoryPlan::build() {
  // Buffers that outlive the replay (the loss, the gradients): alive to its end.
  for (auto& b : buffers_)
    if (b.free < 0) b.free = events_;
  open_.clear();
  peak_ = peak_live_bytes(buffers_);
  arena_bytes_ = pack_buffers(buffers_);
  planned_ = overwritten_ = 0;
  plan_ = core::ArenaPlan{};
  for (const auto& b : buffers_) {
    plan_.sizes.push_back(b.size);
    plan_.offsets.push_back(b.offset);
    planned_ += b.offset >= 0;
    overwritten_ += b.offset >= 0 && b.over >= 0 && buffers_[size_t(b.over)].offset == b.offset;
  }
  // The arena is taken at each replay's start (start_replay): the pool's, or one of its own.
  phase_ = arena_bytes_ > 0 ? Phase::kUsing : Phase::kRecorded;
}

void MemoryPlan::drop() {
  dropped_ = true;
  phase_ = Phase::kRecorded;
  // Buffers of the arena still alive would be freed into it later (cpu_free ignores them);
  // the arena itself stays until the plan goes.
}

MemoryPlan::Scope::Scope(MemoryPlan* plan) : plan_(plan) {
  if (!plan_ || !plan_->in_replay_) {
    plan_ = nullptr;
    return;
  }
  if (plan_->phase_ == Phase::kRecording) core::set_allocation_observer(&plan_->observer_);
  if (plan_->phase_ == Phase::kUsing) core::set_arena_plan(&plan_->plan_);
}

MemoryPlan::Scope::~Scope() {
  if (!plan_) return;
  core::set_allocation_observer(nullptr);
  core::set_arena_plan(nullptr);
}

}  // namespace zenith::graph
