#include "platform/jobs/scheduler.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "platform/jobs/quantity.h"

namespace zenith::platform {

std::vector<Placement> schedule(std::vector<QueuedJob> queue, std::vector<FreeDevice> free,
                                const SchedulerOptions& options) {
  std::stable_sort(queue.begin(), queue.end(), [](const QueuedJob& a, const QueuedJob& b) {
    if (a.priority != b.priority) return a.priority > b.priority;
    return a.seq < b.seq;
  });
  std::sort(free.begin(), free.end(),
            [](const FreeDevice& a, const FreeDevice& b) { return a.index < b.index; });
  std::vector<Placement> out;
  for (const auto& job : queue) {
    std::vector<int> picked;
    for (const auto& d : free) {
      if (static_cast<int>(picked.size()) == job.devices) break;
      if (d.kind == job.kind) picked.push_back(d.index);
    }
    if (static_cast<int>(picked.size()) < job.devices) {
      // A starving job reserves the cluster: nothing behind it may take devices.
      if (job.waited_s >= options.starvation_s) break;
      continue;
    }
    out.push_back({job.id, picked});
    free.erase(std::remove_if(free.begin(), free.end(),
                              [&](const FreeDevice& d) {
                                return std::find(picked.begin(), picked.end(), d.index) !=
                                       picked.end();
                              }),
               free.end());
  }
  return out;
}

std::optional<std::string> never_fits(int devices, const std::string& kind, int nodes,
                                      int total_of_kind, const std::string& backend) {
  if (backend == "slurm") return std::nullopt;  // Slurm knows its own cluster's size
  if (nodes > 1)
    return "the job asks for " + std::to_string(nodes) +
           " nodes but the local backend runs on one host (use backend: slurm)";
  if (devices > total_of_kind)
    return "the job asks for " + std::to_string(devices) + " " + kind +
           " devices but this host has " + std::to_string(total_of_kind);
  return std::nullopt;
}

std::optional<std::string> never_fits_partition(int devices, const std::string& kind, int nodes,
                                                const PartitionNodes& partition) {
  const std::string where = "Slurm partition '" + partition.name + "'";
  const bool gpus = kind == "cuda";
  const std::vector<int>& held = gpus ? partition.gpus : partition.cpus;
  if (nodes > static_cast<int>(held.size()))
    return "the job asks for " + std::to_string(nodes) + " nodes but " + where + " has " +
           std::to_string(held.size());
  const int roomy = static_cast<int>(
      std::count_if(held.begin(), held.end(), [&](int n) { return n >= devices; }));
  if (roomy >= nodes) return std::nullopt;
  const int most = held.empty() ? 0 : *std::max_element(held.begin(), held.end());
  const std::string unit = gpus ? " GPUs" : " CPUs";
  return "the job asks for " + std::to_string(devices) + " " + kind + " devices on each of " +
         std::to_string(nodes) + (nodes == 1 ? " node" : " nodes") + " but " +
         std::to_string(roomy) + " of the " + std::to_string(held.size()) + " nodes of " + where +
         " have " + std::to_string(devices) + unit +
         " (the most a node has: " + std::to_string(most) + ")";
}

}  // namespace zenith::platform

namespace zenith::platform {

namespace {

// The memory limit of this process's cgroup (v2 memory.max or v1 memory.limit_in_bytes); 0 when
// there is none.
std::int64_t cgroup_memory_limit() {
  std::ifstream in("/proc/self/cgroup");
  for (std::string line; std::getline(in, line);) {
    const auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    std::string file;
    if (controllers.empty())
      file = "/sys/fs/cgroup" + path + "/memory.max";
    else if (("," + controllers + ",").find(",memory,") != std::string::npos)
      file = "/sys/fs/cgroup/memory" + path + "/memory.limit_in_bytes";
    else
      continue;
    std::ifstream f(file);
    long long v = 0;
    if (f >> v && v > 0 && v < (1LL << 60)) return v;  // "max" or a huge v1 value: no limit
  }
  return 0;
}

}  // namespace

HostCapacity host_capacity(const std::string& data_dir) {
  HostCapacity h;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) h.memory_bytes = std::int64_t(pages) * page;
  if (const std::int64_t limit = cgroup_memory_limit(); limit > 0)
    h.memory_bytes = h.memory_bytes > 0 ? std::min(h.memory_bytes, limit) : limit;
  struct statvfs fs;
  if (statvfs(data_dir.c_str(), &fs) == 0)
    h.storage_bytes = std::int64_t(fs.f_blocks) * fs.f_frsize;
  return h;
}

std::optional<std::string> never_fits_host(std::int64_t memory_bytes, std::int64_t storage_bytes,
                                           const HostCapacity& host) {
  if (memory_bytes > 0 && host.memory_bytes > 0 && memory_bytes > host.memory_bytes)
    return "the job asks for memory " + format_size(memory_bytes) + " but this host has " +
           format_size(host.memory_bytes);
  if (storage_bytes > 0 && host.storage_bytes > 0 && storage_bytes > host.storage_bytes)
    return "the job asks for storage " + format_size(storage_bytes) +
           " but the filesystem of the job dirs holds " + format_size(host.storage_bytes);
  return std::nullopt;
}

}  // namespace zenith::platform
