// The Chrome trace event format (the "JSON Object Format" of the Trace Event Format document):
// metadata events name each rank's process and each thread; ops, step phases and steps are
// complete events ("X") on their thread, sorted by start with enclosing events first so that
// viewers nest them; the allocator's bytes in use are a counter ("C") of the rank's process.
#include <algorithm>
#include <cmath>

#include "zenith/profiler.h"

namespace zenith::profiler {
namespace {

using nlohmann::json;

// Microseconds with nanosecond resolution, as viewers accept fractional times.
double us(double t) { return std::round(t * 1000.0) / 1000.0; }

json metadata(const char* name, int pid, int64_t tid, json args) {
  return {{"ph", "M"}, {"name", name}, {"pid", pid}, {"tid", tid}, {"args", std::move(args)}};
}

struct Slice {
  double start, end;
  json event;
};

}  // namespace

json chrome_trace(const Recording& r) {
  json events = json::array();
  const int pid = r.rank;
  events.push_back(metadata("process_name", pid, 0, {{"name", "rank " + std::to_string(pid)}}));
  events.push_back(metadata("process_sort_index", pid, 0, {{"sort_index", pid}}));
  for (const ThreadTrack& t : r.threads) {
    events.push_back(metadata("thread_name", pid, t.tid, {{"name", t.name}}));
    std::vector<Slice> slices;
    for (const RangeRecord& g : t.ranges) {
      const bool step = g.step > 0;
      json e = {{"ph", "X"},
                {"cat", step ? "step" : "phase"},
                {"name", step ? "step " + std::to_string(g.step) : std::string(g.name)},
                {"pid", pid},
                {"tid", t.tid},
                {"ts", us(g.start_us)},
                {"dur", us(g.end_us - g.start_us)}};
      if (step) e["args"] = {{"step", g.step}};
      slices.push_back({g.start_us, g.end_us, std::move(e)});
    }
    for (const OpRecord& o : t.ops) {
      json args = {{"self_us", us(o.self_us)}};
      if (!o.shapes.empty()) args["shapes"] = o.shapes;
      if (o.flops > 0) args["gflop"] = o.flops * 1e-9;
      if (o.decomposed) args["decomposed"] = true;
      slices.push_back({o.start_us,
                        o.end_us,
                        {{"ph", "X"},
                         {"cat", "op"},
                         {"name", o.name},
                         {"pid", pid},
                         {"tid", t.tid},
                         {"ts", us(o.start_us)},
                         {"dur", us(o.end_us - o.start_us)},
                         {"args", std::move(args)}}});
    }
    std::stable_sort(slices.begin(), slices.end(), [](const Slice& a, const Slice& b) {
      return a.start != b.start ? a.start < b.start : a.end > b.end;
    });
    for (auto& s : slices) events.push_back(std::move(s.event));
  }
  std::vector<MemorySample> memory;
  for (const ThreadTrack& t : r.threads)
    memory.insert(memory.end(), t.memory.begin(), t.memory.end());
  std::sort(memory.begin(), memory.end(),
            [](const MemorySample& a, const MemorySample& b) { return a.time_us < b.time_us; });
  for (const MemorySample& m : memory)
    events.push_back({{"ph", "C"},
                      {"name", "memory"},
                      {"pid", pid},
                      {"tid", 0},
                      {"ts", us(m.time_us)},
                      {"args", {{"allocated_MiB", double(m.bytes) / 1048576.0}}}});
  return {{"traceEvents", std::move(events)},
          {"displayTimeUnit", "ms"},
          {"otherData",
           {{"producer", "zenith"},
            {"ranks", json::array({pid})},
            {"peak_allocated_bytes", r.peak_bytes}}}};
}

json merge_chrome_traces(const std::vector<json>& traces) {
  json events = json::array();
  json ranks = json::array();
  for (const json& t : traces) {
    for (const json& e : t.at("traceEvents")) events.push_back(e);
    if (t.contains("otherData"))
      for (const json& r : t["otherData"].value("ranks", json::array())) ranks.push_back(r);
  }
  return {{"traceEvents", std::move(events)},
          {"displayTimeUnit", "ms"},
          {"otherData", {{"producer", "zenith"}, {"ranks", std::move(ranks)}}}};
}

}  // namespace zenith::profiler
