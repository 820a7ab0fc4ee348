#include "platform/telemetry/nvml.h"

#include <dlfcn.h>

namespace zenith::platform {

namespace {
// The few NVML types this file needs, as nvml.h declares them (stable C ABI).
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
struct nvmlUtilization_t {
  unsigned int gpu, memory;
};
struct nvmlMemory_t {
  unsigned long long total, free, used;
};
constexpr nvmlReturn_t kNvmlSuccess = 0;
}  // namespace

struct Nvml::Api {
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  nvmlReturn_t (*count)(unsigned int*) = nullptr;
  nvmlReturn_t (*handle)(unsigned int, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*utilization)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
};

Nvml::Nvml(void* lib, std::unique_ptr<Api> api, int count)
    : lib_(lib), api_(std::move(api)), count_(count) {}

Nvml::~Nvml() {
  if (api_ && api_->shutdown) api_->shutdown();
  if (lib_) dlclose(lib_);
}

std::unique_ptr<Nvml> Nvml::open(const std::string& library) {
  void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) return nullptr;
  auto api = std::make_unique<Api>();
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
    return fn != nullptr;
  };
  bool ok = sym(api->init, "nvmlInit_v2") && sym(api->shutdown, "nvmlShutdown") &&
            sym(api->count, "nvmlDeviceGetCount_v2") &&
            sym(api->handle, "nvmlDeviceGetHandleByIndex_v2") &&
            sym(api->utilization, "nvmlDeviceGetUtilizationRates") &&
            sym(api->memory, "nvmlDeviceGetMemoryInfo");
  unsigned int count = 0;
  if (!ok || api->init() != kNvmlSuccess) {
    dlclose(lib);
    return nullptr;
  }
  if (api->count(&count) != kNvmlSuccess || count == 0) {
    api->shutdown();
    dlclose(lib);
    return nullptr;
  }
  return std::unique_ptr<Nvml>(new Nvml(lib, std::move(api), static_cast<int>(count)));
}

std::optional<GpuSample> Nvml::sample(int index) const {
  if (index < 0 || index >= count_) return std::nullopt;
  nvmlDevice_t dev = nullptr;
  if (api_->handle(static_cast<unsigned int>(index), &dev) != kNvmlSuccess) return std::nullopt;
  GpuSample s;
  nvmlUtilization_t u{};
  if (api_->utilization(dev, &u) == kNvmlSuccess) s.utilization = u.gpu / 100.0;
  nvmlMemory_t m{};
  if (api_->memory(dev, &m) != kNvmlSuccess) return std::nullopt;
  s.memory_used = static_cast<std::int64_t>(m.used);
  s.memory_total = static_cast<std::int64_t>(m.total);
  return s;
}

}  // namespace zenith::platform
