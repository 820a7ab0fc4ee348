// How much a piece of code grows this process's peak resident memory: VmHWM (the peak RSS) is
// reset to the current RSS through /proc/self/clear_refs, the code runs, and the new peak is
// compared with the RSS before. Tests use it to show that a kernel never holds a large
// temporary (e.g. attention's [T, S] scores, a float32 copy of 16-bit weights).
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>

#include "core/allocator.h"

namespace zenith::testing {

// A "Key:  N kB" line of /proc/self/status in bytes, -1 when missing.
inline int64_t proc_status_bytes(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key, 0) == 0) return std::stoll(line.substr(std::strlen(key))) * 1024;
  return -1;
}

// The peak RSS growth of fn in bytes, or -1 when the peak cannot be reset. The allocator's
// cache is emptied first, so blocks the code allocates come from the system and count.
inline int64_t peak_rss_growth(const std::function<void()>& fn) {
  core::empty_allocator_cache();
  {
    std::ofstream f("/proc/self/clear_refs");  // "5": reset the peak RSS (Linux >= 4.0)
    f << "5";
    f.flush();
    if (!f) return -1;
  }
  const int64_t before = proc_status_bytes("VmRSS:");
  fn();
  return proc_status_bytes("VmHWM:") - before;
}

}  // namespace zenith::testing
