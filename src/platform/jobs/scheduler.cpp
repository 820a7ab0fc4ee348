#include "platform/jobs/scheduler.h"

#include <algorithm>

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
