// Where a tensor's storage lives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace zenith {

// PrivateUse1: a slot for an out-of-tree backend (its allocator and kernels registered at run
// time, as PyTorch's PrivateUse1); the tests use it for a backend with forward kernels only.
enum class DeviceType : uint8_t { CPU, CUDA, PrivateUse1 };
inline constexpr size_t kDeviceTypeCount = 3;

const char* device_type_name(DeviceType type);  // "cpu", "cuda", "privateuse1"

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string str() const;  // "cpu", "cuda:0"
};

inline const Device kCPU{DeviceType::CPU, 0};

}  // namespace zenith
