// Where a tensor's storage lives.
#pragma once

#include <string>

namespace zenith {

enum class DeviceType : uint8_t { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string str() const;  // "cpu", "cuda:0"
};

inline const Device kCPU{DeviceType::CPU, 0};

}  // namespace zenith
