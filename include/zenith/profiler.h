// The profiler (MindInsight's role): times every dispatched op (eager, and graph replay through
// the same dispatch observer hooks) and the step phases the training loop marks (data wait,
// forward, backward, optimizer, communication wait), samples the allocator's bytes in use, and
// writes a Chrome trace that Perfetto (ui.perfetto.dev) and chrome://tracing open, plus a summary
// table (ops by self time, share of the step, GFLOP/s where the FLOPs are known).
//
//   profiler::Profiler prof;      // starts recording
//   model.train(1, dataset);      // or any ops
//   prof.stop();
//   prof.write("out/profile");    // trace.json, summary.json, summary.txt
//   std::puts(prof.summary().table().c_str());
//
// While no Profiler runs nothing is registered: ops and ranges pay one empty-list check.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace zenith::profiler {

struct Options {
  bool record_shapes = true;  // each op event carries its input shapes
  bool record_memory = true;  // a memory counter sample after each op that changed it
  int rank = 0;               // the trace's process (pid): one track group per rank
};

// ---- what a recording holds (times in microseconds of the monotonic clock)
struct OpRecord {
  const char* name;  // the op list's name, "conv2d"
  double start_us, end_us;
  double self_us;    // minus the ops it ran inside it (a decomposition's)
  double flops = 0;  // 0: not known for this op
  bool decomposed = false;
  std::string shapes;  // "[64, 1, 28, 28] [32, 1, 3, 3]" when recorded
};
struct RangeRecord {
  const char* name;  // core::range_name: "step", "forward", ...
  double start_us, end_us;
  int64_t step = 0;  // steps: 1, 2, ... in the recording
};
struct MemorySample {
  double time_us;
  int64_t bytes;  // allocated and not freed
};
struct ThreadTrack {
  int64_t tid = 0;  // the OS thread id
  std::string name;
  std::vector<OpRecord> ops;
  std::vector<RangeRecord> ranges;
  std::vector<MemorySample> memory;
};
struct Recording {
  int rank = 0;
  double start_us = 0, end_us = 0;
  int64_t peak_bytes = 0;  // the allocator's peak during the recording
  std::vector<ThreadTrack> threads;
};

// ---- its summary
struct PhaseTime {
  std::string name;  // "data wait", ..., "other" (the rest of the steps)
  double ms = 0;     // over all steps, nested phases excluded (backward without its waits)
  double share = 0;  // of the steps' time
};
struct OpTime {
  std::string name;
  int64_t calls = 0;
  double self_ms = 0, total_ms = 0;
  double share = 0;  // self time over the steps' time (over the recording without steps)
  double gflop = 0;  // 0: FLOPs not known
  double gflops_per_second() const { return self_ms > 0 ? gflop / (self_ms * 1e-3) : 0; }
};
struct Summary {
  int rank = 0;
  int64_t steps = 0;
  double steps_ms = 0;  // the steps' total time
  double wall_ms = 0;   // the recording's
  std::vector<PhaseTime> phases;
  std::vector<OpTime> ops;  // by self time, largest first
  int64_t peak_bytes = 0;

  nlohmann::json to_json() const;
  // The phase split and the `top_ops` ops with the most self time, as a text table.
  std::string table(size_t top_ops = 15) const;
};
Summary summarize(const Recording& recording);

// The Chrome trace event format: {"traceEvents": [...], "displayTimeUnit": "ms"}; pid = rank,
// tid = OS thread; ops and phases as complete events ("ph": "X"), memory as a counter ("C").
nlohmann::json chrome_trace(const Recording& recording);
// One trace of several ranks' traces (their events side by side, one process each).
nlohmann::json merge_chrome_traces(const std::vector<nlohmann::json>& traces);

class Profiler {
 public:
  // Starts recording; one Profiler runs at a time per process.
  explicit Profiler(Options options = {});
  ~Profiler();  // stops
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  // Ends the recording (ranges still open end now). Idempotent.
  void stop();
  bool running() const { return running_; }

  // After stop().
  const Recording& recording() const;
  Summary summary() const { return summarize(recording()); }
  // DIR/trace<suffix>.json, DIR/summary<suffix>.json and DIR/summary<suffix>.txt (DIR created).
  void write(const std::string& dir, const std::string& suffix = "") const;

 private:
  Options options_;
  bool running_ = false;
  Recording recording_;
};

// Whether a Profiler is recording in this process.
bool active();

}  // namespace zenith::profiler
