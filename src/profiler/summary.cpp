// The summary of a recording: the step phase split (each phase without the phases nested in it,
// so backward excludes its communication waits) and the ops by self time.
#include <algorithm>
#include <cstdio>
#include <map>

#include "core/trace_range.h"
#include "zenith/profiler.h"

namespace zenith::profiler {
namespace {

using nlohmann::json;

std::string format(const char* fmt, auto... args) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), fmt, args...);
  return buf;
}

// Per phase name, its time minus that of the ranges nested in it, over every thread.
std::map<std::string, double> phase_self_us(const Recording& r, double& steps_us, int64_t& steps) {
  std::map<std::string, double> self;
  for (const ThreadTrack& t : r.threads) {
    std::vector<const RangeRecord*> sorted;
    for (const RangeRecord& g : t.ranges) sorted.push_back(&g);
    std::sort(sorted.begin(), sorted.end(), [](const RangeRecord* a, const RangeRecord* b) {
      return a->start_us != b->start_us ? a->start_us < b->start_us : a->end_us > b->end_us;
    });
    std::vector<const RangeRecord*> open;
    for (const RangeRecord* g : sorted) {
      while (!open.empty() && open.back()->end_us <= g->start_us) open.pop_back();
      const double duration = g->end_us - g->start_us;
      if (g->step > 0) {
        steps_us += duration;
        ++steps;
      } else {
        self[g->name] += duration;
        if (!open.empty() && open.back()->step == 0) self[open.back()->name] -= duration;
      }
      open.push_back(g);
    }
  }
  return self;
}

}  // namespace

Summary summarize(const Recording& r) {
  Summary s;
  s.rank = r.rank;
  s.wall_ms = (r.end_us - r.start_us) * 1e-3;
  s.peak_bytes = r.peak_bytes;
  double steps_us = 0;
  const auto self = phase_self_us(r, steps_us, s.steps);
  s.steps_ms = steps_us * 1e-3;
  const double whole_ms = s.steps > 0 ? s.steps_ms : s.wall_ms;
  auto share = [&](double ms) { return whole_ms > 0 ? ms / whole_ms : 0.0; };

  double phases_ms = 0;
  for (core::Range range : {core::Range::data_wait, core::Range::forward, core::Range::backward,
                            core::Range::optimizer, core::Range::communication_wait}) {
    auto it = self.find(core::range_name(range));
    const double ms = it == self.end() ? 0.0 : it->second * 1e-3;
    phases_ms += ms;
    s.phases.push_back({core::range_name(range), ms, share(ms)});
  }
  if (s.steps > 0) {
    const double other = std::max(0.0, s.steps_ms - phases_ms);
    s.phases.push_back({"other", other, share(other)});
  }

  std::map<std::string, OpTime> ops;
  for (const ThreadTrack& t : r.threads)
    for (const OpRecord& o : t.ops) {
      OpTime& op = ops[o.name];
      op.name = o.name;
      op.calls += 1;
      op.self_ms += o.self_us * 1e-3;
      op.total_ms += (o.end_us - o.start_us) * 1e-3;
      op.gflop += o.flops * 1e-9;
    }
  for (auto& [name, op] : ops) {
    op.share = share(op.self_ms);
    s.ops.push_back(op);
  }
  std::sort(s.ops.begin(), s.ops.end(),
            [](const OpTime& a, const OpTime& b) { return a.self_ms > b.self_ms; });
  return s;
}

json Summary::to_json() const {
  json phase_list = json::array();
  for (const PhaseTime& p : phases)
    phase_list.push_back({{"name", p.name},
                          {"ms", p.ms},
                          {"ms_per_step", steps > 0 ? p.ms / double(steps) : p.ms},
                          {"share", p.share}});
  json op_list = json::array();
  for (const OpTime& o : ops) {
    json j = {{"name", o.name},
              {"calls", o.calls},
              {"self_ms", o.self_ms},
              {"total_ms", o.total_ms},
              {"share", o.share}};
    if (o.gflop > 0) {
      j["gflop"] = o.gflop;
      j["gflops_per_second"] = o.gflops_per_second();
    }
    op_list.push_back(std::move(j));
  }
  return {{"rank", rank},
          {"steps", steps},
          {"steps_ms", steps_ms},
          {"ms_per_step", steps > 0 ? steps_ms / double(steps) : 0.0},
          {"wall_ms", wall_ms},
          {"peak_allocated_bytes", peak_bytes},
          {"phases", std::move(phase_list)},
          {"ops", std::move(op_list)}};
}

std::string Summary::table(size_t top_ops) const {
  std::string out;
  if (steps > 0)
    out += format("profile of rank %d: %lld steps, %.2f ms per step, peak memory %.1f MiB\n", rank,
                  (long long)steps, steps_ms / double(steps), double(peak_bytes) / 1048576.0);
  else
    out += format("profile of rank %d: %.2f ms, peak memory %.1f MiB\n", rank, wall_ms,
                  double(peak_bytes) / 1048576.0);
  const double per = steps > 0 ? double(steps) : 1.0;
  out += format("  %-22s %10s %7s\n", "phase", steps > 0 ? "ms/step" : "ms", "share");
  for (const PhaseTime& p : phases)
    out += format("  %-22s %10.3f %6.1f%%\n", p.name.c_str(), p.ms / per, p.share * 100);
  out += format("  %-28s %7s %10s %10s %7s %9s\n", "op (by self time)", "calls", "self ms",
                "total ms", "share", "GFLOP/s");
  for (size_t i = 0; i < ops.size() && i < top_ops; ++i) {
    const OpTime& o = ops[i];
    const std::string rate = o.gflop > 0 ? format("%9.1f", o.gflops_per_second()) : "        -";
    out += format("  %-28s %7lld %10.3f %10.3f %6.1f%% %s\n", o.name.c_str(), (long long)o.calls,
                  o.self_ms, o.total_ms, o.share * 100, rate.c_str());
  }
  if (ops.size() > top_ops) out += format("  (%zu more ops)\n", ops.size() - top_ops);
  return out;
}

}  // namespace zenith::profiler
