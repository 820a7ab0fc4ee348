#include "core/dispatch.h"

#include <array>
#include <mutex>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace zenith::dispatch {
namespace {

struct Registry {
  std::unordered_map<std::string, std::array<Kernel, 2>> kernels;
  std::unordered_set<std::string> layout_aware;
  std::vector<std::pair<int, std::pair<Observer, void*>>> observers;
  int next_observer = 1;
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

Attrs& Attrs::set(const char* key, AttrValue value) {
  for (auto& [k, v] : items_)
    if (k == key) {
      v = std::move(value);
      return *this;
    }
  items_.emplace_back(key, std::move(value));
  return *this;
}

bool Attrs::has(const char* key) const {
  for (auto& [k, v] : items_)
    if (k == key) return true;
  return false;
}

std::string Attrs::str() const {
  std::ostringstream os;
  for (auto& [k, v] : items_) {
    os << k << '=';
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
            for (auto i : x) os << i << ',';
          } else if constexpr (std::is_same_v<T, DType>) {
            os << dtype_name(x);
          } else {
            os << x;
          }
        },
        v);
    os << ';';
  }
  return os.str();
}

void register_kernel(const char* op, DeviceType device, Kernel kernel) {
  registry().kernels[op][size_t(device)] = kernel;
}

void declare_layout_aware(const char* op) { registry().layout_aware.insert(op); }

bool has_kernel(const std::string& op, DeviceType device) {
  auto it = registry().kernels.find(op);
  return it != registry().kernels.end() && it->second[size_t(device)] != nullptr;
}

std::vector<Tensor> call(const char* op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  Device device = kCPU;
  bool found = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) continue;
    if (!found) {
      device = inputs[i].device();
      found = true;
    } else if (inputs[i].device() != device) {
      ZENITH_FAIL("[", op, "] expected all tensors on ", device.str(), ", got ",
                  inputs[i].device().str(), " for input ", i);
    }
  }
  auto& r = registry();
  auto it = r.kernels.find(op);
  Kernel kernel = it == r.kernels.end() ? nullptr : it->second[size_t(device.type)];
  if (!kernel)
    ZENITH_FAIL("[", op, "] not supported on ", device.type == DeviceType::CPU ? "cpu" : "cuda");
  bool has_layout = false;
  for (auto& t : inputs) has_layout = has_layout || (t.defined() && t.has_layout());
  if (has_layout && !r.layout_aware.count(op)) {
    std::vector<Tensor> plain = inputs;
    for (auto& t : plain)
      if (t.defined() && t.has_layout()) t = call1("to_plain", {t});
    return call(op, plain, attrs);
  }
  std::vector<Tensor> outputs = kernel(inputs, attrs);
  for (auto& [id, obs] : r.observers) obs.first(obs.second, op, inputs, attrs, outputs);
  return outputs;
}

int add_observer(Observer observer, void* user) {
  auto& r = registry();
  int id = r.next_observer++;
  r.observers.push_back({id, {observer, user}});
  return id;
}

void remove_observer(int id) {
  auto& obs = registry().observers;
  for (auto it = obs.begin(); it != obs.end(); ++it)
    if (it->first == id) {
      obs.erase(it);
      return;
    }
}

}  // namespace zenith::dispatch
