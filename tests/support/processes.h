// Finding and killing the processes a test started (from /proc), and waiting for a condition.
// Needs nothing of the framework.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "support/files.h"

namespace zenith::testing {

// Live processes whose environment holds every one of `needles` (e.g. "ZENITH_JOB_DIR=/tmp/x\n":
// each variable ends with a newline here) and, when given, whose command line holds `command`.
inline std::vector<pid_t> processes_with_env(const std::vector<std::string>& needles,
                                             const std::string& command = "") {
  std::vector<pid_t> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    std::string env = read_all(e.path().string() + "/environ");
    const std::string stat = read_all(e.path().string() + "/stat");
    const auto p = stat.rfind(')');
    if (p != std::string::npos && stat.size() > p + 2 && stat[p + 2] == 'Z') continue;
    std::replace(env.begin(), env.end(), '\0', '\n');
    bool all = true;
    for (const auto& needle : needles) all = all && env.find(needle) != std::string::npos;
    if (all && !command.empty()) {
      std::string cmdline = read_all(e.path().string() + "/cmdline");
      std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
      all = cmdline.find(command) != std::string::npos;
    }
    if (all) out.push_back(std::atoi(name.c_str()));
  }
  return out;
}
inline std::vector<pid_t> processes_with_env(const std::string& needle) {
  return processes_with_env(std::vector<std::string>{needle});
}

inline void kill_all_with_env(const std::string& needle) {
  for (pid_t p : processes_with_env(needle)) kill(p, SIGKILL);
}

// Polls `pred` every 50 ms until it holds or `timeout_s` passes; the last answer.
inline bool wait_for(const std::function<bool()>& pred, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return pred();
}

}  // namespace zenith::testing
