// A stand-in for libnvidia-ml.so.1 (the few calls platform/nvml.cpp makes), for its test: two
// GPUs, the second one 42% busy with 3 of 80 GiB in use.
extern "C" {

struct nvmlDevice_st {
  int index;
};
struct FakeUtilization {
  unsigned int gpu, memory;
};
struct FakeMemory {
  unsigned long long total, free, used;
};

static nvmlDevice_st devices[2] = {{0}, {1}};
static int initialised = 0;

int nvmlInit_v2() { return ++initialised, 0; }
int nvmlShutdown() { return --initialised, 0; }
int nvmlDeviceGetCount_v2(unsigned int* count) { return *count = 2, 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_st** dev) {
  if (i >= 2) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *dev = &devices[i];
  return 0;
}
int nvmlDeviceGetUtilizationRates(nvmlDevice_st* dev, FakeUtilization* u) {
  *u = {dev->index == 1 ? 42u : 0u, 7u};
  return 0;
}
int nvmlDeviceGetMemoryInfo(nvmlDevice_st* dev, FakeMemory* m) {
  const unsigned long long gib = 1ull << 30;
  *m = {80 * gib, (dev->index == 1 ? 77 : 80) * gib, (dev->index == 1 ? 3 : 0) * gib};
  return 0;
}
int fake_nvml_initialised() { return initialised; }
}
