// Tensor: a cheap handle to shared storage with shape, strides, offset, dtype and device.
// Views (reshape, permute, slice, expand) share storage; contiguous() copies when needed.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "zenith/device.h"
#include "zenith/dtype.h"
#include "zenith/error.h"

namespace zenith {

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& s);  // "[64, 1, 28, 28]"
int64_t shape_numel(const Shape& s);
Shape contiguous_strides(const Shape& s);

namespace autograd {
struct Node;
}

// A block of device memory, 64-byte aligned, freed when the last tensor using it goes.
class Storage {
 public:
  Storage(size_t nbytes, Device device);
  // Memory owned elsewhere (a numpy array the Python front end shares): `release` runs instead
  // of the allocator's free when the last tensor using it goes.
  Storage(void* data, size_t nbytes, Device device, std::function<void()> release);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  std::function<void()> release_;  // set: external memory
};

// A backend's private memory layout of a tensor (e.g. a oneDNN blocked format). Tensors with a
// layout hold their data in that format; plain kernels see it only through to_plain().
struct OpaqueLayout {
  virtual ~OpaqueLayout() = default;
  virtual std::string describe() const = 0;
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Shape strides;       // in elements
  int64_t offset = 0;  // in elements
  DType dtype = DType::f32;
  Device device;
  std::shared_ptr<const OpaqueLayout> layout;  // null: plain strided layout

  // Autograd.
  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;         // accumulated gradient of a leaf
  std::shared_ptr<autograd::Node> grad_fn;  // producer of a non-leaf
  uint32_t output_nr = 0;                   // which output of grad_fn this is
  std::weak_ptr<autograd::Node> grad_accumulator;
  bool retains_grad = false;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- factories
  static Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = kCPU);
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = kCPU);
  static Tensor ones(const Shape& shape, DType dtype = DType::f32, Device device = kCPU);
  static Tensor full(const Shape& shape, double value, DType dtype = DType::f32,
                     Device device = kCPU);
  static Tensor scalar(double value, DType dtype = DType::f32);
  static Tensor arange(int64_t n, DType dtype = DType::i64);
  // Copies `values` into a new tensor of `shape` (numel must match), converting to `dtype`.
  static Tensor from_vector(const std::vector<float>& values, const Shape& shape,
                            DType dtype = DType::f32);
  static Tensor from_vector(const std::vector<double>& values, const Shape& shape,
                            DType dtype = DType::f64);
  static Tensor from_vector(const std::vector<int64_t>& values, const Shape& shape,
                            DType dtype = DType::i64);
  // Random tensors from the global generator (see random.h), or a given one.
  static Tensor randn(const Shape& shape, DType dtype = DType::f32);
  static Tensor rand(const Shape& shape, DType dtype = DType::f32);  // U[0, 1)
  static Tensor uniform(const Shape& shape, double low, double high, DType dtype = DType::f32);
  static Tensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype = DType::i64);

  // ---- metadata
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  const Shape& strides() const { return impl().strides; }
  int64_t offset() const { return impl().offset; }
  int64_t dim() const { return int64_t(impl().shape.size()); }
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t numel() const { return shape_numel(impl().shape); }
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().device; }
  bool is_contiguous() const;
  bool has_layout() const { return impl().layout != nullptr; }
  size_t nbytes() const { return size_t(numel()) * itemsize(dtype()); }

  // ---- raw access (plain layout only; data<T>() checks T against dtype)
  void* raw_data() const;
  template <typename T>
  T* data() const;
  const std::shared_ptr<Storage>& storage() const { return impl().storage; }

  // ---- views and copies (differentiable)
  Tensor view(const Shape& shape) const;     // requires compatible strides
  Tensor reshape(const Shape& shape) const;  // view when possible, else copy; one -1 allowed
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor transpose(int64_t a, int64_t b) const;
  Tensor t() const { return transpose(0, 1); }
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;  // drops `dim`
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const {
    return slice(dim, start, start + length);
  }
  Tensor expand(const Shape& shape) const;  // -1 keeps a size
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor contiguous() const;  // self when already contiguous and plain
  Tensor clone() const;
  Tensor to(DType dtype) const;
  Tensor to(Device device) const;

  // ---- autograd
  bool requires_grad() const { return impl().requires_grad; }
  Tensor& requires_grad_(bool value = true);
  bool is_leaf() const { return impl().grad_fn == nullptr; }
  Tensor grad() const;
  void set_grad(const Tensor& g);
  void zero_grad();  // drops the accumulated gradient
  void retain_grad();
  // Backpropagates from this tensor; `gradient` defaults to ones for a scalar. create_graph
  // records the backward so the gradients can be differentiated again (see autograd::grad).
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false,
                bool create_graph = false) const;
  Tensor detach() const;  // shares storage, no history
  std::shared_ptr<autograd::Node> grad_fn() const { return impl().grad_fn; }

  // ---- scalars and host copies
  double item() const;  // one-element tensors
  std::vector<float> to_float_vector() const;
  std::vector<double> to_double_vector() const;
  std::vector<int64_t> to_int_vector() const;
  std::string to_string() const;  // PyTorch-like printing

  // ---- in-place (no autograd; used by optimizers and initialisers under no_grad)
  Tensor& copy_(const Tensor& src);  // broadcasts src, converts dtype
  Tensor& fill_(double value);
  Tensor& zero_() { return fill_(0.0); }

  // ---- arithmetic sugar over ops.h
  Tensor operator-() const;

  TensorImpl& impl() const;
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);
std::ostream& operator<<(std::ostream& os, const Shape& s);

// Element access to typed data; the element type must match the dtype exactly.
template <typename T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::f32;
};
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::f64;
};
template <>
struct DTypeOf<Half> {
  static constexpr DType value = DType::f16;
};
template <>
struct DTypeOf<BFloat16> {
  static constexpr DType value = DType::bf16;
};
template <>
struct DTypeOf<int32_t> {
  static constexpr DType value = DType::i32;
};
template <>
struct DTypeOf<int64_t> {
  static constexpr DType value = DType::i64;
};
template <>
struct DTypeOf<uint8_t> {
  static constexpr DType value = DType::u8;
};
template <>
struct DTypeOf<bool> {
  static constexpr DType value = DType::b8;
};

template <typename T>
T* Tensor::data() const {
  ZENITH_CHECK(DTypeOf<T>::value == dtype(), "[tensor] data<", dtype_name(DTypeOf<T>::value),
               ">() on a ", dtype_name(dtype()), " tensor");
  return static_cast<T*>(raw_data());
}

}  // namespace zenith
