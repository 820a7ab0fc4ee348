// The devices one host offers to jobs: CUDA GPUs where present, else logical CPU devices
// (8 by default, like one Ascend server), each pinned to a share of the host's cores.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zenith::platform {

struct Device {
  int index = 0;                  // DEVICE_ID within its kind
  std::string kind;               // "cpu" | "cuda"
  std::string name;               // "cpu:3", "cuda:0"
  std::vector<int> cores;         // CPU affinity of a rank on this device
  std::int64_t memory_bytes = 0;  // the device's share of host memory (cpu) or its own (cuda)
  bool shares_cores = false;      // other devices run on some of the same cores
};

struct InventoryOptions {
  int cpu_devices = 8;  // logical CPU devices when the host has no GPU
  std::string kind;     // force "cpu" or "cuda"; empty = detect
};

// Cores this process may run on (sched_getaffinity), ascending.
std::vector<int> allowed_cores();

// Number of NVIDIA GPUs visible through /dev/nvidia<N> (0 when none).
int count_cuda_devices();

// Gives each of `count` devices a share of `cores`: contiguous blocks when there are at least
// as many cores as devices, round-robin (devices sharing cores) otherwise.
std::vector<std::vector<int>> split_cores(const std::vector<int>& cores, int count);

std::vector<Device> detect_devices(const InventoryOptions& options);

// The kind jobs get when their spec names none.
std::string default_kind(const std::vector<Device>& devices);

}  // namespace zenith::platform
