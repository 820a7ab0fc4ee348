// A new backend needs forward kernels only: a test backend in the PrivateUse1 slot (host memory,
// its kernels the CPU's run on relabelled tensors) registers a handful of forward kernels and no
// gradient kernel, and a small MLP still trains on it, with the CPU's gradients: every gradient
// runs as its decomposition into those forward ops.
#include <cstring>
#include <set>

#include "core/allocator.h"
#include "core/dispatch.h"
#include "support/op_check.h"

using namespace zenith;
using namespace zenith::testing;

namespace {

const Device kTestDevice{DeviceType::PrivateUse1, 0};

// `t` viewed as a tensor on `device`, sharing its (host) memory.
Tensor relabel(const Tensor& t, Device device) {
  if (!t.defined()) return t;
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = t.storage();
  impl->shape = t.shape();
  impl->strides = t.strides();
  impl->offset = t.offset();
  impl->dtype = t.dtype();
  impl->device = device;
  return Tensor(std::move(impl));
}

// The backend's kernel of `op`: the CPU's, on the same memory.
template <OpId op>
std::vector<Tensor> host_kernel(const std::vector<Tensor>& in, const AttrsOf<op>& attrs) {
  std::vector<Tensor> cpu_in;
  for (auto& t : in) cpu_in.push_back(relabel(t, kCPU));
  std::vector<Tensor> out = dispatch::call<op>(cpu_in, attrs);
  for (auto& t : out) t = relabel(t, kTestDevice);
  return out;
}

// Forward kernels only: no <op>_backward is registered.
ZENITH_REGISTER_KERNEL(matmul, PrivateUse1, host_kernel<OpId::matmul>);
ZENITH_REGISTER_KERNEL(add, PrivateUse1, host_kernel<OpId::add>);
ZENITH_REGISTER_KERNEL(sub, PrivateUse1, host_kernel<OpId::sub>);
ZENITH_REGISTER_KERNEL(mul, PrivateUse1, host_kernel<OpId::mul>);
ZENITH_REGISTER_KERNEL(neg, PrivateUse1, host_kernel<OpId::neg>);
ZENITH_REGISTER_KERNEL(square, PrivateUse1, host_kernel<OpId::square>);
ZENITH_REGISTER_KERNEL(tanh, PrivateUse1, host_kernel<OpId::tanh>);
ZENITH_REGISTER_KERNEL(sum, PrivateUse1, host_kernel<OpId::sum>);
ZENITH_REGISTER_KERNEL(copy, PrivateUse1, host_kernel<OpId::copy>);
ZENITH_REGISTER_KERNEL(fill_, PrivateUse1, host_kernel<OpId::fill_>);

void* host_allocate(size_t nbytes) { return core::cpu_allocate(nbytes); }
void host_free(void* p, size_t nbytes) { core::cpu_free(p, nbytes); }
struct AllocatorRegistration {
  AllocatorRegistration() {
    core::set_device_allocator(DeviceType::PrivateUse1, {&host_allocate, &host_free});
  }
} allocator_registration;

// Copies between the CPU and the test device (both host memory).
Tensor copy_to(const Tensor& t, Device device) {
  Tensor src = relabel(t, kCPU).contiguous();
  Tensor out = Tensor::empty(t.shape(), t.dtype(), device);
  std::memcpy(out.raw_data(), src.raw_data(), src.nbytes());
  return out;
}

struct Mlp {
  std::vector<Tensor> params;  // w1 [4, 8], b1 [8], w2 [8, 1], b2 [1]

  // mean squared error of tanh(x w1 + b1) w2 + b2 against y
  Tensor loss(const Tensor& x, const Tensor& y) const {
    Tensor h = ops::tanh(ops::add(ops::matmul(x, params[0]), params[1]));
    Tensor d = ops::sub(ops::add(ops::matmul(h, params[2]), params[3]), y);
    return ops::mul(ops::sum(ops::square(d)), 1.0 / double(x.size(0)));
  }
  std::vector<Tensor> gradients(const Tensor& x, const Tensor& y) {
    for (auto& p : params) p.zero_grad();
    loss(x, y).backward();
    std::vector<Tensor> g;
    for (auto& p : params) g.push_back(p.grad());
    return g;
  }
  void sgd_step(double lr) {
    NoGradGuard no_grad;
    for (auto& p : params) p = ops::sub(p, ops::mul(p.grad(), lr)).detach().requires_grad_();
  }
};

Mlp make_mlp(Device device) {
  manual_seed(3);
  Mlp m;
  for (Shape s : {Shape{4, 8}, Shape{8}, Shape{8, 1}, Shape{1}})
    m.params.push_back(copy_to(Tensor::uniform(s, -0.5, 0.5, DType::f64), device).requires_grad_());
  return m;
}

}  // namespace

TEST(ForwardOnlyBackend, TrainsAnMlpWithTheCpusGradients) {
  for (OpId op : {OpId::tanh_backward, OpId::square_backward})
    ASSERT_FALSE(dispatch::has_kernel(op, DeviceType::PrivateUse1));
  manual_seed(11);
  Tensor x = Tensor::uniform({16, 4}, -1, 1, DType::f64);
  Tensor y = ops::tanh(ops::matmul(x, Tensor::uniform({4, 1}, -1, 1, DType::f64)));
  Tensor xd = copy_to(x, kTestDevice), yd = copy_to(y, kTestDevice);
  Mlp cpu = make_mlp(kCPU), dev = make_mlp(kTestDevice);

  // Which ops ran where: on the device, every gradient op ran as its decomposition.
  struct Seen {
    std::set<OpId> kernels, decomposed;
  } seen;
  int id = dispatch::add_observer(
      [](void* user, const dispatch::OpEvent& e) {
        bool on_device = false;
        for (auto& t : e.inputs)
          on_device = on_device || (t.defined() && t.device() == kTestDevice);
        if (!on_device) return;
        auto* s = static_cast<Seen*>(user);
        (e.decomposed ? s->decomposed : s->kernels).insert(e.op);
      },
      &seen);
  std::vector<Tensor> gd = dev.gradients(xd, yd);
  dispatch::remove_observer(id);
  std::vector<Tensor> gc = cpu.gradients(x, y);
  for (size_t i = 0; i < gc.size(); ++i) {
    ASSERT_TRUE(gd[i].defined()) << "parameter " << i;
    EXPECT_EQ(gd[i].device(), kTestDevice);
    EXPECT_TRUE(all_close(relabel(gd[i], kCPU), gc[i], 1e-12, 1e-14)) << "parameter " << i;
  }
  EXPECT_TRUE(seen.decomposed.count(OpId::tanh_backward));
  EXPECT_TRUE(seen.decomposed.count(OpId::square_backward));
  for (OpId op : seen.kernels)
    EXPECT_FALSE(std::string(op_name(op)).ends_with("_backward")) << op_name(op);

  // Training lowers the loss, step for step as on the CPU.
  const double first = dev.loss(xd, yd).item();
  for (int step = 0; step < 100; ++step) {
    dev.gradients(xd, yd);
    dev.sgd_step(0.1);
    cpu.gradients(x, y);
    cpu.sgd_step(0.1);
  }
  const double last = dev.loss(xd, yd).item();
  EXPECT_LT(last, 0.25 * first) << "loss " << first << " -> " << last;
  EXPECT_NEAR(last, cpu.loss(x, y).item(), 1e-12);
}

TEST(ForwardOnlyBackend, AnOpWithoutAKernelNamesTheOpAndTheDevice) {
  Tensor x = copy_to(Tensor::ones({3}), kTestDevice);
  EXPECT_TRUE(throws_with([&] { ops::exp(x); }, "[exp] not supported on privateuse1"));
  EXPECT_TRUE(throws_with([&] { ops::relu(x); }, "[relu] not supported on privateuse1"));
  EXPECT_TRUE(throws_with([&] { ops::add(x, Tensor::ones({3})); },
                          "[add] expected all tensors on privateuse1:0, got cpu for input 1"));
  EXPECT_EQ(kTestDevice.str(), "privateuse1:0");
}
