// Tensor handle basics: storage, factories, metadata, host copies. Differentiable members are
// defined by the layers that own them: views in src/ops/shape.cpp, copies in src/ops/copy.cpp,
// backward() and retain_grad() in src/autograd/tensor_autograd.cpp. What core needs of them
// (fills, dtype conversions for host copies) it dispatches itself.
#include "zenith/tensor.h"

#include <cstdlib>
#include <cstring>
#include <functional>
#include <ostream>
#include <sstream>

#include "core/allocator.h"
#include "core/dispatch.h"

namespace zenith {

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

Shape contiguous_strides(const Shape& s) {
  Shape st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= std::max<int64_t>(s[i], 1);
  }
  return st;
}

std::ostream& operator<<(std::ostream& os, const Shape& s) { return os << shape_str(s); }

Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  // CPU: 64-byte aligned; large blocks come from a cache.
  data_ = core::device_allocate(device.type, nbytes);
}

Storage::Storage(void* data, size_t nbytes, Device device, std::function<void()> release)
    : data_(data), nbytes_(nbytes), device_(device), release_(std::move(release)) {
  ZENITH_CHECK(release_, "[tensor] external storage needs a release function");
}

Storage::~Storage() {
  if (release_)
    release_();
  else
    core::device_free(device_.type, data_, nbytes_);
}

namespace {
// t's values as a plain contiguous tensor of `dtype` (t itself when it already is one).
Tensor plain_copy(const Tensor& t, DType dtype) {
  Tensor p = t.has_layout() ? dispatch::call1<OpId::to_plain>({t}) : t;
  if (p.dtype() == dtype && p.is_contiguous()) return p;
  return dispatch::call1<OpId::copy>({p}, {.dtype = dtype});
}
}  // namespace

TensorImpl& Tensor::impl() const {
  ZENITH_CHECK(impl_ != nullptr, "[tensor] use of an undefined tensor");
  return *impl_;
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (auto d : shape) ZENITH_CHECK(d >= 0, "[empty] negative size in shape ", shape_str(shape));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(size_t(shape_numel(shape)) * itemsize(dtype), device);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  impl->device = device;
  return Tensor(std::move(impl));
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  if (device.type != DeviceType::CPU) return full(shape, 0.0, dtype, device);
  Tensor t = empty(shape, dtype, device);
  std::memset(t.raw_data(), 0, t.nbytes());
  return t;
}

Tensor Tensor::ones(const Shape& shape, DType dtype, Device device) {
  return full(shape, 1.0, dtype, device);
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  dispatch::call<OpId::fill_>({t}, {.value = value});
  return t;
}

Tensor Tensor::scalar(double value, DType dtype) { return full({}, value, dtype); }

Tensor Tensor::arange(int64_t n, DType dtype) {
  std::vector<double> v(size_t(std::max<int64_t>(n, 0)));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = double(i);
  return from_vector(v, {n}, dtype);
}

namespace {
template <typename Src>
Tensor from_host(const std::vector<Src>& values, const Shape& shape, DType dtype, DType src_dtype) {
  ZENITH_CHECK(int64_t(values.size()) == shape_numel(shape), "[from_vector] ", values.size(),
               " values do not fill shape ", shape_str(shape));
  Tensor src = Tensor::empty(shape, src_dtype);
  if (!values.empty()) std::memcpy(src.raw_data(), values.data(), values.size() * sizeof(Src));
  return plain_copy(src, dtype);
}
}  // namespace

Tensor Tensor::from_vector(const std::vector<float>& v, const Shape& s, DType d) {
  return from_host(v, s, d, DType::f32);
}
Tensor Tensor::from_vector(const std::vector<double>& v, const Shape& s, DType d) {
  return from_host(v, s, d, DType::f64);
}
Tensor Tensor::from_vector(const std::vector<int64_t>& v, const Shape& s, DType d) {
  return from_host(v, s, d, DType::i64);
}

int64_t Tensor::size(int64_t d) const {
  int64_t n = dim();
  if (d < 0) d += n;
  ZENITH_CHECK(d >= 0 && d < n, "[tensor] dim ", d, " out of range for shape ", shape_str(shape()));
  return shape()[size_t(d)];
}

bool Tensor::is_contiguous() const {
  if (has_layout()) return false;
  int64_t acc = 1;
  for (size_t i = shape().size(); i-- > 0;) {
    if (shape()[i] == 1) continue;
    if (strides()[i] != acc) return false;
    acc *= shape()[i];
  }
  return true;
}

void* Tensor::raw_data() const {
  ZENITH_CHECK(!has_layout(), "[tensor] raw access to a tensor in backend layout ",
               impl().layout->describe(), "; call contiguous() first");
  return static_cast<char*>(impl().storage->data()) + impl().offset * int64_t(itemsize(dtype()));
}

Tensor& Tensor::requires_grad_(bool value) {
  ZENITH_CHECK(!value || is_floating(dtype()),
               "[requires_grad] only floating tensors can require "
               "gradients, got ",
               dtype_name(dtype()));
  ZENITH_CHECK(is_leaf(), "[requires_grad] can only be set on leaf tensors");
  impl().requires_grad = value;
  return *this;
}

Tensor Tensor::grad() const { return impl().grad ? Tensor(impl().grad) : Tensor(); }

void Tensor::set_grad(const Tensor& g) { impl().grad = g.defined() ? g.impl_ptr() : nullptr; }

void Tensor::zero_grad() { impl().grad = nullptr; }

Tensor Tensor::detach() const {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = this->impl().storage;
  impl->shape = shape();
  impl->strides = strides();
  impl->offset = offset();
  impl->dtype = dtype();
  impl->device = device();
  impl->layout = this->impl().layout;
  return Tensor(std::move(impl));
}

double Tensor::item() const {
  ZENITH_CHECK(numel() == 1, "[item] expected a one-element tensor, got shape ",
               shape_str(shape()));
  dispatch::note_host_read(*this);
  return plain_copy(*this, DType::f64).data<double>()[0];
}

std::vector<double> Tensor::to_double_vector() const {
  dispatch::note_host_read(*this);
  Tensor t = plain_copy(*this, DType::f64);
  const double* p = t.data<double>();
  return std::vector<double>(p, p + t.numel());
}

std::vector<float> Tensor::to_float_vector() const {
  dispatch::note_host_read(*this);
  Tensor t = plain_copy(*this, DType::f32);
  const float* p = t.data<float>();
  return std::vector<float>(p, p + t.numel());
}

std::vector<int64_t> Tensor::to_int_vector() const {
  dispatch::note_host_read(*this);
  Tensor t = plain_copy(*this, DType::i64);
  const int64_t* p = t.data<int64_t>();
  return std::vector<int64_t>(p, p + t.numel());
}

std::string Tensor::to_string() const {
  if (!defined()) return "tensor(undefined)";
  std::ostringstream os;
  std::vector<double> v = to_double_vector();
  const Shape& s = shape();
  bool integral = !is_floating(dtype());
  const size_t limit = 6;  // elements shown at each end of a long dimension
  std::function<void(size_t, int64_t)> rec = [&](size_t d, int64_t base) {
    if (d == s.size()) {
      if (integral)
        os << int64_t(v[size_t(base)]);
      else
        os << v[size_t(base)];
      return;
    }
    os << '[';
    int64_t inner = 1;
    for (size_t k = d + 1; k < s.size(); ++k) inner *= s[k];
    for (int64_t i = 0; i < s[d]; ++i) {
      if (s[d] > int64_t(2 * limit) && i == int64_t(limit)) {
        os << "..., ";
        i = s[d] - int64_t(limit) - 1;
        continue;
      }
      if (i) os << (d + 1 == s.size() ? ", " : ",\n" + std::string(d + 8, ' '));
      rec(d + 1, base + i * inner);
    }
    os << ']';
  };
  os.precision(4);
  os << "tensor(";
  rec(0, 0);
  os << ", shape=" << shape_str(s) << ", dtype=" << dtype_name(dtype());
  if (requires_grad()) os << ", requires_grad=true";
  os << ')';
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.to_string(); }

}  // namespace zenith
