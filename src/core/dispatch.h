// The one dispatch entry: (op, typed attributes, inputs) -> the kernel registered for the inputs'
// device, or the op's decomposition into other ops. Ops call dispatch::call<OpId::x>; kernels
// register with ZENITH_REGISTER_KERNEL, decompositions with ZENITH_REGISTER_DECOMPOSITION. Both
// are checked at compile time: the op must be in core/ops.def and the function must take that
// op's attribute struct.
//
// Which runs: the backend's kernel when it has one, else the decomposition, else the call fails
// with "[op] not supported on <device>". A decomposition also runs instead of a kernel while
// grad mode is on and an input requires grad (a create_graph backward): a fused gradient kernel
// records nothing, its composed form records every op, so it can be differentiated again.
#pragma once

#include <array>
#include <vector>

#include "core/op_list.h"
#include "zenith/tensor.h"

namespace zenith::dispatch {

// A kernel (or decomposition) of `op`.
template <OpId op>
using KernelFn = std::vector<Tensor> (*)(const std::vector<Tensor>& inputs,
                                         const AttrsOf<op>& attrs);
// The type-erased form the registry stores; attrs points at the op's AttrsOf.
using ErasedKernel = std::vector<Tensor> (*)(const std::vector<Tensor>& inputs, const void* attrs);

void register_kernel(OpId op, DeviceType device, ErasedKernel kernel);
void register_decomposition(OpId op, ErasedKernel decomposition);
bool has_kernel(OpId op, DeviceType device);
bool has_decomposition(OpId op);
// The registered kernel of `op` on `device` (null when none): graph replay calls it directly.
ErasedKernel kernel_of(OpId op, DeviceType device);
bool is_layout_aware(OpId op);

// Every op of the list, in list order.
struct OpInfo {
  OpId id;
  const char* name;
};
std::vector<OpInfo> registered_ops();

// Kernels of ops declared layout-aware receive tensors in a backend layout (TensorImpl::layout)
// as they are; every other kernel receives such inputs converted by the to_plain op first.
void declare_layout_aware(OpId op);

// Runs `op` on the device of its (defined) inputs; all must share one device.
std::vector<Tensor> call_erased(OpId op, const std::vector<Tensor>& inputs, const void* attrs);

template <OpId op>
std::vector<Tensor> call(const std::vector<Tensor>& inputs, const AttrsOf<op>& attrs = {}) {
  return call_erased(op, inputs, &attrs);
}
template <OpId op>
Tensor call1(const std::vector<Tensor>& inputs, const AttrsOf<op>& attrs = {}) {
  return call_erased(op, inputs, &attrs)[0];
}

// While alive, `op` runs its decomposition even where a kernel exists (tests compare a fused
// fast path with the composed gradient it must equal).
class ForceDecomposition {
 public:
  explicit ForceDecomposition(OpId op);
  ~ForceDecomposition();
  ForceDecomposition(const ForceDecomposition&) = delete;
  ForceDecomposition& operator=(const ForceDecomposition&) = delete;

 private:
  OpId op_;
  bool previous_;
};

// Observers see every dispatched op (graph tracing, profiler, op coverage). A decomposed op is
// seen after the ops it decomposed into, with decomposed = true. An op that a kernel dispatched
// itself (e.g. a layout conversion inside an elementwise kernel) is seen with depth > 0, before
// the op whose kernel ran it.
struct OpEvent {
  OpId op;
  const std::vector<Tensor>& inputs;
  AttrsRef attrs;
  const std::vector<Tensor>& outputs;
  bool decomposed;
  int depth = 0;  // kernels running around this call on this thread
};
using Observer = void (*)(void* user, const OpEvent& event);
// Told as an op's kernel or decomposition starts (the profiler times ops from it to the end
// event). An op that throws gets no end event.
using BeginObserver = void (*)(void* user, OpId op);
// Returns an id for remove_observer; `begin` may be null.
int add_observer(Observer observer, void* user, BeginObserver begin = nullptr);
void remove_observer(int id);
// For code that runs ops without call_erased (graph replay): tells the observers what
// call_erased would. observed() is false while none is registered.
bool observed();
void notify_begin(OpId op);
void notify_end(const OpEvent& event);

// Host reads of tensor values (item(), to_*_vector()) are reported to one hook per thread: graph
// capture uses it to find steps whose control flow depends on values. Returns the previous hook.
using HostReadHook = void (*)(void* user, const Tensor& t);
std::pair<HostReadHook, void*> set_host_read_hook(HostReadHook hook, void* user);
void note_host_read(const Tensor& t);
// Within its scope host reads only validate (they may fail the step, never change what it
// computes, e.g. token ids checked against the vocabulary): they are not reported, so graph
// capture keeps the step; a replay relies on the kernels' own checks (embedding's range).
class ValidationReads {
 public:
  ValidationReads();
  ~ValidationReads();
  ValidationReads(const ValidationReads&) = delete;
  ValidationReads& operator=(const ValidationReads&) = delete;

 private:
  bool previous_;
};

template <OpId op, KernelFn<op> fn>
std::vector<Tensor> erase_kernel(const std::vector<Tensor>& inputs, const void* attrs) {
  return fn(inputs, *static_cast<const AttrsOf<op>*>(attrs));
}

template <OpId op, KernelFn<op> fn>
struct KernelRegistrar {
  explicit KernelRegistrar(DeviceType device) {
    register_kernel(op, device, &erase_kernel<op, fn>);
  }
};

template <OpId op, KernelFn<op> fn>
struct DecompositionRegistrar {
  DecompositionRegistrar() { register_decomposition(op, &erase_kernel<op, fn>); }
};

struct LayoutAwareDeclaration {
  explicit LayoutAwareDeclaration(OpId op) { declare_layout_aware(op); }
};

}  // namespace zenith::dispatch

#define ZENITH_KCONCAT_INNER(a, b) a##b
#define ZENITH_KCONCAT(a, b) ZENITH_KCONCAT_INNER(a, b)
// ZENITH_REGISTER_KERNEL(conv2d, CPU, conv2d_kernel); conv2d_kernel takes const Conv2dAttrs&.
#define ZENITH_REGISTER_KERNEL(op, device, fn)                                       \
  static ::zenith::dispatch::KernelRegistrar<::zenith::OpId::op, fn> ZENITH_KCONCAT( \
      zenith_kernel_, __LINE__)(::zenith::DeviceType::device)
// ZENITH_REGISTER_DECOMPOSITION(sigmoid_backward, sigmoid_backward_composed); in src/ops.
#define ZENITH_REGISTER_DECOMPOSITION(op, fn)                                               \
  static ::zenith::dispatch::DecompositionRegistrar<::zenith::OpId::op, fn> ZENITH_KCONCAT( \
      zenith_decomposition_, __LINE__)
// ZENITH_LAYOUT_AWARE(relu); next to the kernel that handles layout tensors itself.
#define ZENITH_LAYOUT_AWARE(op)                                                          \
  static ::zenith::dispatch::LayoutAwareDeclaration ZENITH_KCONCAT(zenith_layout_aware_, \
                                                                   __LINE__)(::zenith::OpId::op)
