// Copies and conversions: contiguous, clone, to(dtype), cast, copy_, fill_.
#include "ops/op_utils.h"

namespace zenith {

namespace {
// x through the to_plain op where it has a backend layout (not detail::plain, which calls
// contiguous() and so this file).
Tensor to_plain(const Tensor& x) {
  return x.has_layout() ? dispatch::call1<OpId::to_plain>({x}) : x;
}
}  // namespace

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  Tensor out = dispatch::call1<OpId::copy>({to_plain(*this)}, {.dtype = dtype()});
  if (autograd::needs_grad({*this}))
    autograd::record("contiguous", {*this}, {out},
                     [](const std::vector<Tensor>& g) { return std::vector<Tensor>{g[0]}; });
  return out;
}

Tensor Tensor::clone() const {
  Tensor out = dispatch::call1<OpId::copy>({to_plain(*this)}, {.dtype = dtype()});
  if (autograd::needs_grad({*this}))
    autograd::record("clone", {*this}, {out},
                     [](const std::vector<Tensor>& g) { return std::vector<Tensor>{g[0]}; });
  return out;
}

Tensor Tensor::to(DType target) const {
  if (target == dtype()) return *this;
  Tensor out = dispatch::call1<OpId::copy>({to_plain(*this)}, {.dtype = target});
  if (is_floating(target) && autograd::needs_grad({*this})) {
    DType source = dtype();
    autograd::record("cast", {*this}, {out}, [source](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{g[0].to(source)};
    });
  }
  return out;
}

Tensor Tensor::to(Device device) const {
  if (device == this->device()) return *this;
  ZENITH_FAIL("[to] copying between ", this->device().str(), " and ", device.str(),
              " is not supported in this build");
}

Tensor& Tensor::copy_(const Tensor& src) {
  ZENITH_CHECK(!has_layout(), "[copy_] destination is in a backend layout");
  dispatch::call<OpId::copy_>({*this, to_plain(src)});
  return *this;
}

Tensor& Tensor::fill_(double value) {
  ZENITH_CHECK(!has_layout(), "[fill_] destination is in a backend layout");
  dispatch::call<OpId::fill_>({*this}, {.value = value});
  return *this;
}

namespace ops {
Tensor cast(const Tensor& x, DType dtype) { return x.to(dtype); }
}  // namespace ops

}  // namespace zenith
