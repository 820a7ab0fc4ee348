// The one dispatch entry: (op name, attributes, inputs) -> the kernel registered for the inputs'
// device. Ops call dispatch::call; kernels register with ZENITH_REGISTER_KERNEL.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "zenith/tensor.h"

namespace zenith::dispatch {

using AttrValue = std::variant<bool, int64_t, double, std::string, std::vector<int64_t>, DType>;

class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<const char*, AttrValue>> items) {
    for (auto& [k, v] : items) items_.emplace_back(k, v);
  }
  Attrs& set(const char* key, AttrValue value);
  bool has(const char* key) const;
  template <typename T>
  const T& get(const char* key) const {
    for (auto& [k, v] : items_)
      if (k == key) {
        if (auto p = std::get_if<T>(&v)) return *p;
        ZENITH_FAIL("[dispatch] attribute '", key, "' has another type");
      }
    ZENITH_FAIL("[dispatch] missing attribute '", key, "'");
  }
  template <typename T>
  T get_or(const char* key, T fallback) const {
    for (auto& [k, v] : items_)
      if (k == key)
        if (auto p = std::get_if<T>(&v)) return *p;
    return fallback;
  }
  std::string str() const;  // stable text form, usable as a cache key
  const std::vector<std::pair<std::string, AttrValue>>& items() const { return items_; }

 private:
  std::vector<std::pair<std::string, AttrValue>> items_;
};

using Kernel = std::vector<Tensor> (*)(const std::vector<Tensor>& inputs, const Attrs& attrs);

void register_kernel(const char* op, DeviceType device, Kernel kernel);
bool has_kernel(const std::string& op, DeviceType device);

// Kernels of ops declared layout-aware receive tensors in a backend layout (TensorImpl::layout)
// as they are; every other kernel receives such inputs converted by the "to_plain" op first.
void declare_layout_aware(const char* op);

// Runs `op` on the device of its (defined) inputs; all must share one device.
std::vector<Tensor> call(const char* op, const std::vector<Tensor>& inputs,
                         const Attrs& attrs = {});
inline Tensor call1(const char* op, const std::vector<Tensor>& inputs, const Attrs& attrs = {}) {
  return call(op, inputs, attrs)[0];
}

// Observers see every dispatched op (graph tracing, profiler). Returns an id for removal.
using Observer = void (*)(void* user, const char* op, const std::vector<Tensor>& inputs,
                          const Attrs& attrs, const std::vector<Tensor>& outputs);
int add_observer(Observer observer, void* user);
void remove_observer(int id);

struct LayoutAwareDeclaration {
  explicit LayoutAwareDeclaration(const char* op) { declare_layout_aware(op); }
};

struct KernelRegistrar {
  KernelRegistrar(const char* op, DeviceType device, Kernel kernel) {
    register_kernel(op, device, kernel);
  }
};

}  // namespace zenith::dispatch

#define ZENITH_KCONCAT_INNER(a, b) a##b
#define ZENITH_KCONCAT(a, b) ZENITH_KCONCAT_INNER(a, b)
// ZENITH_REGISTER_KERNEL("add", CPU, add_kernel);
#define ZENITH_REGISTER_KERNEL(op, device, fn)                                         \
  static ::zenith::dispatch::KernelRegistrar ZENITH_KCONCAT(zenith_kernel_, __LINE__)( \
      op, ::zenith::DeviceType::device, fn)
// ZENITH_LAYOUT_AWARE("relu"); next to the kernel that handles layout tensors itself.
#define ZENITH_LAYOUT_AWARE(op)                                                          \
  static ::zenith::dispatch::LayoutAwareDeclaration ZENITH_KCONCAT(zenith_layout_aware_, \
                                                                   __LINE__)(op)
