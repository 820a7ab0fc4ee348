#include "profiler/recorder.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

#include "core/allocator.h"
#include "core/dispatch.h"
#include "core/trace_range.h"
#include "profiler/flops.h"

namespace zenith::profiler::detail {
namespace {

double now_us() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct OpenOp {
  OpId op;
  double start_us;
  double child_us = 0;  // ops that ran inside it
};

struct OpenRange {
  core::Range range;
  double start_us;
  int64_t step;
};

// One thread's part of a session: only that thread writes it while the session is live.
struct ThreadState {
  ThreadTrack track;
  std::vector<OpenOp> ops;
  std::vector<OpenRange> ranges;
  int64_t last_bytes = -1;
};

struct Session {
  Options options;
  uint64_t id;
  double start_us;
  std::mutex mu;  // guards threads (a thread's first event adds its state)
  std::vector<std::unique_ptr<ThreadState>> threads;
  std::atomic<int64_t> steps{0};
  int observer = 0;
};

std::atomic<Session*> g_session{nullptr};
std::atomic<int> g_in_flight{0};
std::atomic<uint64_t> g_next_id{1};
std::mutex g_control;                 // start/stop
std::unique_ptr<Session> g_owned;     // the live session
thread_local uint64_t t_session = 0;  // the session t_state belongs to
thread_local ThreadState* t_state = nullptr;

std::string thread_name(bool main) {
  char buf[32] = {};
  pthread_getname_np(pthread_self(), buf, sizeof(buf));
  if (main) return std::string("main (") + buf + ")";
  return buf[0] ? buf : "thread";
}

ThreadState& state_of(Session& s) {
  if (t_session == s.id) return *t_state;
  auto state = std::make_unique<ThreadState>();
  state->track.tid = int64_t(syscall(SYS_gettid));
  state->track.name = thread_name(state->track.tid == int64_t(getpid()));
  std::lock_guard<std::mutex> lock(s.mu);
  s.threads.push_back(std::move(state));
  t_session = s.id;
  t_state = s.threads.back().get();
  return *t_state;
}

// Every hook runs inside one of these: stop_session waits until none is left.
class InFlight {
 public:
  InFlight() : session_((g_in_flight.fetch_add(1), g_session.load())) {}
  ~InFlight() { g_in_flight.fetch_sub(1); }
  Session* session() const { return session_; }

 private:
  Session* session_;
};

std::string shapes_text(const std::vector<Tensor>& inputs) {
  std::ostringstream os;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i) os << ' ';
    os << (inputs[i].defined() ? shape_str(inputs[i].shape()) : "-");
  }
  return os.str();
}

void sample_memory(Session& s, ThreadState& t, double time) {
  if (!s.options.record_memory) return;
  const int64_t bytes = int64_t(core::allocator_stats().live_bytes);
  if (bytes == t.last_bytes) return;
  t.last_bytes = bytes;
  t.track.memory.push_back({time, bytes});
}

void on_op_begin(void*, OpId op) {
  InFlight guard;
  if (Session* s = guard.session()) state_of(*s).ops.push_back({op, now_us()});
}

void on_op_end(void*, const dispatch::OpEvent& event) {
  const double end = now_us();
  InFlight guard;
  Session* s = guard.session();
  if (!s) return;
  ThreadState& t = state_of(*s);
  // Ops that threw never ended: drop them down to this op's begin (none: it began before the
  // session did).
  while (!t.ops.empty() && t.ops.back().op != event.op) t.ops.pop_back();
  if (t.ops.empty()) return;
  const OpenOp open = t.ops.back();
  t.ops.pop_back();
  const double duration = end - open.start_us;
  if (!t.ops.empty()) t.ops.back().child_us += duration;
  OpRecord r{.name = op_name(event.op),
             .start_us = open.start_us,
             .end_us = end,
             .self_us = duration - open.child_us,
             .decomposed = event.decomposed,
             .shapes = {}};
  if (!event.decomposed) r.flops = op_flops(event);  // a decomposition's ops count their own
  if (s->options.record_shapes) r.shapes = shapes_text(event.inputs);
  t.track.ops.push_back(std::move(r));
  sample_memory(*s, t, end);
}

void on_range_begin(core::Range range) {
  InFlight guard;
  Session* s = guard.session();
  if (!s) return;
  const int64_t step = range == core::Range::step ? s->steps.fetch_add(1) + 1 : 0;
  state_of(*s).ranges.push_back({range, now_us(), step});
}

void close_range(ThreadState& t, const OpenRange& open, double end) {
  t.track.ranges.push_back({core::range_name(open.range), open.start_us, end, open.step});
}

void on_range_end(core::Range range) {
  const double end = now_us();
  InFlight guard;
  Session* s = guard.session();
  if (!s) return;
  ThreadState& t = state_of(*s);
  // Ranges are scoped: a mismatch means this one began before the session did.
  if (t.ranges.empty() || t.ranges.back().range != range) return;
  close_range(t, t.ranges.back(), end);
  t.ranges.pop_back();
}

const core::RangeHooks kRangeHooks{&on_range_begin, &on_range_end};

}  // namespace

void start_session(const Options& options) {
  std::lock_guard<std::mutex> lock(g_control);
  ZENITH_CHECK(!g_owned, "[profiler] a profiler is already running in this process");
  auto s = std::make_unique<Session>();
  s->options = options;
  s->id = g_next_id.fetch_add(1);
  s->start_us = now_us();
  core::reset_peak_live_bytes();
  g_owned = std::move(s);
  g_session.store(g_owned.get());
  g_owned->observer = dispatch::add_observer(&on_op_end, nullptr, &on_op_begin);
  core::set_range_hooks(&kRangeHooks);
}

Recording stop_session() {
  std::lock_guard<std::mutex> lock(g_control);
  ZENITH_CHECK(g_owned, "[profiler] no profiler is running");
  const double end = now_us();
  core::set_range_hooks(nullptr);
  dispatch::remove_observer(g_owned->observer);
  g_session.store(nullptr);
  while (g_in_flight.load() > 0) std::this_thread::yield();

  std::unique_ptr<Session> s = std::move(g_owned);
  Recording out;
  out.rank = s->options.rank;
  out.start_us = s->start_us;
  out.end_us = end;
  out.peak_bytes = int64_t(core::allocator_stats().peak_live_bytes);
  for (auto& t : s->threads) {
    while (!t->ranges.empty()) {  // still open (the step that stopped the profiler): end now
      close_range(*t, t->ranges.back(), end);
      t->ranges.pop_back();
    }
    out.threads.push_back(std::move(t->track));
  }
  return out;
}

bool session_live() { return g_session.load() != nullptr; }

}  // namespace zenith::profiler::detail
