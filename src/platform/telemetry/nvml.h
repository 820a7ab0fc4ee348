// GPU utilisation and memory through NVML, loaded at run time (dlopen libnvidia-ml.so.1) so
// every build links and a host without the NVIDIA driver simply has no GPU samples.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace zenith::platform {

struct GpuSample {
  double utilization = 0;        // 0..1, over the driver's last sample period
  std::int64_t memory_used = 0;  // bytes
  std::int64_t memory_total = 0;
};

class Nvml {
 public:
  // nullptr when the library or a GPU is missing, or nvmlInit fails. `library` is for tests.
  static std::unique_ptr<Nvml> open(const std::string& library = "libnvidia-ml.so.1");
  ~Nvml();  // nvmlShutdown, dlclose
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  int device_count() const { return count_; }
  // nullopt when the driver cannot answer for this device now.
  std::optional<GpuSample> sample(int index) const;

 private:
  struct Api;
  Nvml(void* lib, std::unique_ptr<Api> api, int count);
  void* lib_;
  std::unique_ptr<Api> api_;
  int count_;
};

}  // namespace zenith::platform
