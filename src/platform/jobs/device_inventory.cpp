#include "platform/jobs/device_inventory.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

namespace zenith::platform {

std::vector<int> allowed_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cores;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cores.push_back(c);
  }
  if (cores.empty()) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    for (long c = 0; c < std::max(1L, n); ++c) cores.push_back(static_cast<int>(c));
  }
  return cores;
}

int count_cuda_devices() {
  std::error_code ec;
  int count = 0;
  // /dev/nvidia0, /dev/nvidia1, ... (not nvidiactl, nvidia-uvm).
  for (const auto& e : std::filesystem::directory_iterator("/dev", ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() > 6 && name.compare(0, 6, "nvidia") == 0 &&
        name.find_first_not_of("0123456789", 6) == std::string::npos)
      ++count;
  }
  return count;
}

std::vector<std::vector<int>> split_cores(const std::vector<int>& cores, int count) {
  std::vector<std::vector<int>> out(std::max(0, count));
  if (cores.empty() || count <= 0) return out;
  const int n = static_cast<int>(cores.size());
  if (n >= count) {
    // Contiguous blocks; the first n % count devices get one extra core.
    int pos = 0;
    for (int d = 0; d < count; ++d) {
      int take = n / count + (d < n % count ? 1 : 0);
      for (int i = 0; i < take; ++i) out[d].push_back(cores[pos++]);
    }
  } else {
    for (int d = 0; d < count; ++d) out[d].push_back(cores[d % n]);
  }
  return out;
}

std::vector<Device> detect_devices(const InventoryOptions& options) {
  std::vector<Device> devices;
  const std::vector<int> cores = allowed_cores();
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  const std::int64_t host_memory = pages > 0 && page > 0 ? std::int64_t(pages) * page : 0;

  int gpus = options.kind == "cpu" ? 0 : count_cuda_devices();
  if (gpus > 0) {
    auto shares = split_cores(cores, gpus);
    for (int i = 0; i < gpus; ++i)
      devices.push_back(
          {i, "cuda", "cuda:" + std::to_string(i), shares[i], 0, int(cores.size()) < gpus});
    return devices;
  }
  const int count = std::max(1, options.cpu_devices);
  auto shares = split_cores(cores, count);
  for (int i = 0; i < count; ++i)
    devices.push_back({i, "cpu", "cpu:" + std::to_string(i), shares[i], host_memory / count,
                       int(cores.size()) < count});
  return devices;
}

std::string default_kind(const std::vector<Device>& devices) {
  for (const auto& d : devices)
    if (d.kind == "cuda") return "cuda";
  return "cpu";
}

}  // namespace zenith::platform
