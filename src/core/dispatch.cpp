#include "core/dispatch.h"

#include <algorithm>

#include "core/decomposition_forced.h"
#include "core/grad_mode.h"
#include "core/output_stash.h"

namespace zenith::dispatch {
namespace {

struct Registry {
  std::array<std::array<ErasedKernel, kDeviceTypeCount>, kOpCount> kernels{};
  std::array<ErasedKernel, kOpCount> decompositions{};
  std::array<bool, kOpCount> layout_aware{};
  struct Registered {
    int id;
    Observer end;
    BeginObserver begin;
    void* user;
  };
  std::vector<Registered> observers;
  bool any_begin = false;
  int next_observer = 1;
};

Registry& registry() {
  static Registry r;
  return r;
}

thread_local std::array<bool, kOpCount> g_forced{};
thread_local int g_kernel_depth = 0;
thread_local HostReadHook g_host_read_hook = nullptr;
thread_local void* g_host_read_user = nullptr;
thread_local bool g_validation_reads = false;
thread_local OutputStash* g_output_stash = nullptr;

// Counts the kernels running on this thread while alive (exception safe).
struct KernelDepth {
  KernelDepth() { ++g_kernel_depth; }
  ~KernelDepth() { --g_kernel_depth; }
};

bool any_requires_grad(const std::vector<Tensor>& inputs) {
  for (auto& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

void tell_begin(const Registry& r, OpId op) {
  if (!r.any_begin) return;
  for (auto& o : r.observers)
    if (o.begin) o.begin(o.user, op);
}

void notify(const Registry& r, OpId op, const std::vector<Tensor>& inputs, const void* attrs,
            const std::vector<Tensor>& outputs, bool decomposed) {
  if (r.observers.empty()) return;
  notify_end(OpEvent{op, inputs, AttrsRef(op, attrs), outputs, decomposed, g_kernel_depth});
}

}  // namespace

void register_kernel(OpId op, DeviceType device, ErasedKernel kernel) {
  registry().kernels[size_t(op)][size_t(device)] = kernel;
}

void register_decomposition(OpId op, ErasedKernel decomposition) {
  registry().decompositions[size_t(op)] = decomposition;
}

bool has_kernel(OpId op, DeviceType device) {
  return registry().kernels[size_t(op)][size_t(device)] != nullptr;
}

bool has_decomposition(OpId op) { return registry().decompositions[size_t(op)] != nullptr; }

ErasedKernel kernel_of(OpId op, DeviceType device) {
  return registry().kernels[size_t(op)][size_t(device)];
}

bool is_layout_aware(OpId op) { return registry().layout_aware[size_t(op)]; }

std::vector<OpInfo> registered_ops() {
  std::vector<OpInfo> ops;
  ops.reserve(kOpCount);
  for (size_t i = 0; i < kOpCount; ++i) ops.push_back({OpId(i), op_name(OpId(i))});
  return ops;
}

void declare_layout_aware(OpId op) { registry().layout_aware[size_t(op)] = true; }

std::vector<Tensor> call_erased(OpId op, const std::vector<Tensor>& inputs, const void* attrs) {
  if (OutputStash* stash = g_output_stash) {
    StashScope plain(nullptr);  // the ops this one dispatches run as usual
    return stash->call(op, inputs, [&] { return call_erased(op, inputs, attrs); });
  }
  Device device = kCPU;
  bool found = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) continue;
    if (!found) {
      device = inputs[i].device();
      found = true;
    } else if (inputs[i].device() != device) {
      ZENITH_FAIL("[", op_name(op), "] expected all tensors on ", device.str(), ", got ",
                  inputs[i].device().str(), " for input ", i);
    }
  }
  const auto& r = registry();
  const size_t index = size_t(op);
  ErasedKernel kernel = r.kernels[index][size_t(device.type)];
  ErasedKernel decomposition = r.decompositions[index];
  if (decomposition &&
      (!kernel || g_forced[index] || (core::grad_mode_enabled() && any_requires_grad(inputs)))) {
    tell_begin(r, op);
    std::vector<Tensor> outputs = decomposition(inputs, attrs);
    notify(r, op, inputs, attrs, outputs, true);
    return outputs;
  }
  if (!kernel) ZENITH_FAIL("[", op_name(op), "] not supported on ", device_type_name(device.type));
  if (!r.layout_aware[index]) {
    bool has_layout = false;
    for (auto& t : inputs) has_layout = has_layout || (t.defined() && t.has_layout());
    if (has_layout) {
      std::vector<Tensor> plain = inputs;
      for (auto& t : plain)
        if (t.defined() && t.has_layout()) t = call1<OpId::to_plain>({t});
      return call_erased(op, plain, attrs);
    }
  }
  tell_begin(r, op);
  std::vector<Tensor> outputs;
  {
    KernelDepth depth;
    outputs = kernel(inputs, attrs);
  }
  notify(r, op, inputs, attrs, outputs, false);
  return outputs;
}

StashScope::StashScope(OutputStash* stash) : previous_(g_output_stash) { g_output_stash = stash; }
StashScope::~StashScope() { g_output_stash = previous_; }

ForceDecomposition::ForceDecomposition(OpId op) : op_(op), previous_(g_forced[size_t(op)]) {
  g_forced[size_t(op)] = true;
}

ForceDecomposition::~ForceDecomposition() { g_forced[size_t(op_)] = previous_; }

bool decomposition_forced(OpId op) { return g_forced[size_t(op)]; }

int add_observer(Observer observer, void* user, BeginObserver begin) {
  auto& r = registry();
  int id = r.next_observer++;
  r.observers.push_back({id, observer, begin, user});
  r.any_begin = r.any_begin || begin != nullptr;
  return id;
}

void remove_observer(int id) {
  auto& r = registry();
  std::erase_if(r.observers, [id](const Registry::Registered& o) { return o.id == id; });
  r.any_begin = std::any_of(r.observers.begin(), r.observers.end(),
                            [](const Registry::Registered& o) { return o.begin != nullptr; });
}

bool observed() { return !registry().observers.empty(); }

void notify_begin(OpId op) { tell_begin(registry(), op); }

void notify_end(const OpEvent& event) {
  for (auto& o : registry().observers) o.end(o.user, event);
}

std::pair<HostReadHook, void*> set_host_read_hook(HostReadHook hook, void* user) {
  std::pair<HostReadHook, void*> previous{g_host_read_hook, g_host_read_user};
  g_host_read_hook = hook;
  g_host_read_user = user;
  return previous;
}

void note_host_read(const Tensor& t) {
  if (g_host_read_hook && !g_validation_reads) g_host_read_hook(g_host_read_user, t);
}

ValidationReads::ValidationReads() : previous_(g_validation_reads) { g_validation_reads = true; }
ValidationReads::~ValidationReads() { g_validation_reads = previous_; }

}  // namespace zenith::dispatch
