// Gang scheduling of queued jobs onto free devices: all of a job's devices or none,
// highest priority first, FIFO within a priority, smaller jobs backfilling around a job
// that does not fit yet (until that job has waited `starvation_s`).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace zenith::platform {

struct QueuedJob {
  std::int64_t id = 0;
  int priority = 0;
  std::int64_t seq = 0;  // submit order
  int devices = 1;
  std::string kind;     // device kind wanted
  double waited_s = 0;  // time in the queue
};

struct FreeDevice {
  int index = 0;
  std::string kind;
};

struct Placement {
  std::int64_t job_id = 0;
  std::vector<int> devices;  // device indices, ascending
};

struct SchedulerOptions {
  // Once the head job has waited this long, nothing behind it may start before it.
  double starvation_s = 600;
};

// Decides which queued jobs start now. Pure: the caller marks the devices busy.
std::vector<Placement> schedule(std::vector<QueuedJob> queue, std::vector<FreeDevice> free,
                                const SchedulerOptions& options = {});

// Why a job can never run on this inventory, or nullopt when it fits an idle cluster.
std::optional<std::string> never_fits(int devices, const std::string& kind, int nodes,
                                      int total_of_kind, const std::string& backend);

// The nodes of a Slurm partition and what each holds (sinfo).
struct PartitionNodes {
  std::string name;
  std::vector<int> cpus;  // per node
  std::vector<int> gpus;  // per node (gres gpu), 0 where none
};

// Why `nodes` nodes with `devices` devices of `kind` each (one Slurm task per device, a CPU
// device being one CPU) can never run in the partition, with the numbers; nullopt when they fit.
std::optional<std::string> never_fits_partition(int devices, const std::string& kind, int nodes,
                                                const PartitionNodes& partition);

// What this host has for jobs: its memory (or the server's memory cgroup limit, when lower)
// and the size of the filesystem holding the job dirs. 0 when unknown.
struct HostCapacity {
  std::int64_t memory_bytes = 0;
  std::int64_t storage_bytes = 0;
};
HostCapacity host_capacity(const std::string& data_dir);

// Why a job's memory or storage request can never be met on this host, with the numbers.
std::optional<std::string> never_fits_host(std::int64_t memory_bytes, std::int64_t storage_bytes,
                                           const HostCapacity& host);

}  // namespace zenith::platform
