// The schema of the profiler's Chrome trace, checked in C++ (the unit suite needs no Python;
// tests/e2e/profile_trace.schema.json states the same rules for a JSON Schema validator):
//   {"traceEvents": [event...], "displayTimeUnit": "ms"|"ns", "otherData"?: {...}}
//   event "ph": "X" complete: name, cat (op|phase|step) strings; pid, tid integers; ts, dur
//                 numbers >= 0; args an object if present
//              "C" counter:  name, pid, tid, ts; args an object of numbers
//              "M" metadata: name in process_name|process_sort_index|thread_name; pid, tid; args
// and what viewers need beyond the shape: complete events on one thread nest (a slice that
// starts inside another ends inside it, as Perfetto requires to draw them), and every thread with
// events is named.
#pragma once

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace zenith::testing {

// Every violation, each naming the event's index; empty when the trace conforms.
inline std::vector<std::string> chrome_trace_problems(const nlohmann::json& trace) {
  using nlohmann::json;
  std::vector<std::string> problems;
  auto fail = [&](size_t i, const std::string& what) {
    problems.push_back("event " + std::to_string(i) + ": " + what);
  };
  if (!trace.is_object() || !trace.contains("traceEvents") || !trace["traceEvents"].is_array())
    return {"not an object with a traceEvents array"};
  if (trace.contains("displayTimeUnit") && trace["displayTimeUnit"] != "ms" &&
      trace["displayTimeUnit"] != "ns")
    problems.push_back("displayTimeUnit is neither \"ms\" nor \"ns\"");
  if (trace.contains("otherData") && !trace["otherData"].is_object())
    problems.push_back("otherData is not an object");

  using Thread = std::pair<int64_t, int64_t>;
  std::map<Thread, std::vector<std::pair<double, double>>> slices;
  std::set<Thread> named;
  const json& events = trace["traceEvents"];
  for (size_t i = 0; i < events.size(); ++i) {
    const json& e = events[i];
    if (!e.is_object()) {
      fail(i, "not an object");
      continue;
    }
    for (const char* key : {"ph", "name"})
      if (!e.contains(key) || !e[key].is_string()) fail(i, std::string(key) + " is not a string");
    for (const char* key : {"pid", "tid"})
      if (!e.contains(key) || !e[key].is_number_integer())
        fail(i, std::string(key) + " is not an integer");
    if (e.contains("args") && !e["args"].is_object()) fail(i, "args is not an object");
    if (!e.contains("ph") || !e["ph"].is_string() || !e.contains("pid") || !e.contains("tid"))
      continue;
    const std::string ph = e["ph"];
    const Thread thread{e["pid"].get<int64_t>(), e["tid"].get<int64_t>()};
    auto number = [&](const char* key) {
      if (!e.contains(key) || !e[key].is_number() || e[key].get<double>() < 0) {
        fail(i, std::string(key) + " is not a number >= 0");
        return 0.0;
      }
      return e[key].get<double>();
    };
    if (ph == "X") {
      const std::string cat = e.value("cat", "");
      if (cat != "op" && cat != "phase" && cat != "step") fail(i, "cat '" + cat + "' is unknown");
      const double ts = number("ts"), dur = number("dur");
      slices[thread].push_back({ts, ts + dur});
    } else if (ph == "C") {
      number("ts");
      if (!e.contains("args") || !e["args"].is_object() || e["args"].empty())
        fail(i, "a counter without values");
      else
        for (const auto& [k, v] : e["args"].items())
          if (!v.is_number()) fail(i, "counter value " + k + " is not a number");
    } else if (ph == "M") {
      const std::string name = e.value("name", "");
      if (name != "process_name" && name != "process_sort_index" && name != "thread_name")
        fail(i, "metadata '" + name + "' is unknown");
      if (!e.contains("args") || !e["args"].is_object()) fail(i, "metadata without args");
      if (name == "thread_name") named.insert(thread);
    } else {
      fail(i, "ph '" + ph + "' is not X, C or M");
    }
  }
  for (auto& [thread, list] : slices) {
    const std::string where =
        "thread " + std::to_string(thread.second) + " of pid " + std::to_string(thread.first);
    if (!named.count(thread)) problems.push_back(where + " has no thread_name");
    std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first < b.first : a.second > b.second;
    });
    std::vector<double> open_ends;
    for (const auto& [start, end] : list) {
      while (!open_ends.empty() && open_ends.back() <= start) open_ends.pop_back();
      // 1 ns of slack: times are rounded to the nanosecond.
      if (!open_ends.empty() && end > open_ends.back() + 1e-3)
        problems.push_back(where + ": a slice [" + std::to_string(start) + ", " +
                           std::to_string(end) + "] overlaps the end of the one it starts in");
      open_ends.push_back(end);
    }
  }
  return problems;
}

}  // namespace zenith::testing
