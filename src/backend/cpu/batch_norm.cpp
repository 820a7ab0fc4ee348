// Batch normalisation kernels: per-channel loops for plain tensors (float64, and float32 where
// they beat oneDNN's plain-format batch norm), channel-block loops for oneDNN blocked float32
// activations (batch_norm_blocked.cpp), oneDNN for other blocked formats or on request. Training
// mode also updates the running statistics in place.
#include "backend/cpu/batch_norm.h"

#include <cmath>

#include "backend/cpu/elementwise_functors.h"
#include "backend/cpu/loops.h"
#include "backend/cpu/onednn.h"
#include "core/dispatch.h"

namespace zenith::cpu {
namespace {

namespace dn = onednn;
using dnnl::memory;

// ---- float32: oneDNN

const dnnl::normalization_flags kAffine =
    dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;

dnnl::normalization_flags flags_for(bool training) {
  return training ? kAffine : kAffine | dnnl::normalization_flags::use_global_stats;
}

struct BnFwd {
  dnnl::batch_normalization_forward::primitive_desc pd;
  dn::Primitive prim;
};

// relu: oneDNN's fuse_norm_relu (batch_norm_relu); in training it also writes a workspace.
std::shared_ptr<BnFwd> bn_fwd(const memory::desc& data, bool training, float eps,
                              bool relu = false) {
  std::string key = dn::Key("bn_fwd")
                        .add(data)
                        .add(int64_t(training))
                        .add(int64_t(eps * 1e12))
                        .add(int64_t(relu))
                        .str();
  return dn::cached<BnFwd>(key, [&] {
    auto flags = flags_for(training);
    if (relu) flags = flags | dnnl::normalization_flags::fuse_norm_relu;
    dnnl::batch_normalization_forward::desc d(dnnl::prop_kind::forward_training, data, eps, flags);
    auto e = std::make_shared<BnFwd>();
    e->pd = dnnl::batch_normalization_forward::primitive_desc(d, dn::engine());
    e->prim = dn::Primitive(dnnl::batch_normalization_forward(e->pd));
    return e;
  });
}

// Scale/shift as oneDNN wants them: [C] float32, ones/zeros when the norm is not affine.
Tensor param_or(const Tensor& p, int64_t C, double fill) {
  return p.defined() ? p.contiguous() : Tensor::full({C}, fill, DType::f32);
}

std::vector<Tensor> bn_forward_f32(const std::vector<Tensor>& in, bool training, double momentum,
                                   float eps, bool relu) {
  Tensor x = in[0].has_layout() ? in[0] : in[0].contiguous();
  BnGeometry g(x.shape());
  memory::desc data = dn::desc_of(x);
  auto e = bn_fwd(data, training, eps, relu);
  Tensor y = dn::empty_in(x.shape(), DType::f32, data);
  Tensor scale = param_or(in[1], g.C, 1.0), shift = param_or(in[2], g.C, 0.0);
  Tensor mean = training ? Tensor::empty({g.C}, DType::f32) : in[3].contiguous();
  Tensor var = training ? Tensor::empty({g.C}, DType::f32) : in[4].contiguous();
  std::vector<dn::Arg> args = {dn::arg(DNNL_ARG_SRC, x),       dn::arg(DNNL_ARG_DST, y),
                               dn::arg(DNNL_ARG_SCALE, scale), dn::arg(DNNL_ARG_SHIFT, shift),
                               dn::arg(DNNL_ARG_MEAN, mean),   dn::arg(DNNL_ARG_VARIANCE, var)};
  Tensor workspace;  // the ReLU mask oneDNN's own backward would read; ours reads y
  const memory::desc ws = e->pd.workspace_desc();
  if (ws.get_size() > 0) {
    workspace = Tensor::empty({int64_t(ws.get_size())}, DType::u8);
    args.push_back(dn::arg(DNNL_ARG_WORKSPACE, workspace, ws));
  }
  e->prim.run(args);
  if (training)
    update_running<float>(in[3], in[4], mean.data<float>(), var.data<float>(), g, momentum);
  return {y, mean, var};
}

struct BnBwd {
  dnnl::batch_normalization_backward::primitive_desc pd;
  dn::Primitive prim;
};

std::vector<Tensor> bn_backward_f32(const std::vector<Tensor>& in, bool training, float eps) {
  Tensor x = in[1].has_layout() ? in[1] : in[1].contiguous();
  BnGeometry g(x.shape());
  memory::desc data = dn::desc_of(x);
  auto fwd = bn_fwd(data, training, eps);
  std::string key =
      dn::Key("bn_bwd").add(data).add(int64_t(training)).add(int64_t(eps * 1e12)).str();
  auto e = dn::cached<BnBwd>(key, [&] {
    dnnl::batch_normalization_backward::desc d(dnnl::prop_kind::backward, data, data, eps,
                                               flags_for(training));
    auto e = std::make_shared<BnBwd>();
    e->pd = dnnl::batch_normalization_backward::primitive_desc(d, dn::engine(), fwd->pd);
    e->prim = dn::Primitive(dnnl::batch_normalization_backward(e->pd));
    return e;
  });
  Tensor dy = dn::to_desc(in[0], data);
  Tensor dx = dn::empty_in(x.shape(), DType::f32, data);
  Tensor scale = param_or(in[2], g.C, 1.0);
  Tensor shift = Tensor::zeros({g.C}, DType::f32);  // unused by the math; oneDNN expects it
  Tensor mean = in[3].contiguous(), var = in[4].contiguous();
  Tensor dscale = Tensor::empty({g.C}, DType::f32), dshift = Tensor::empty({g.C}, DType::f32);
  e->prim.run({dn::arg(DNNL_ARG_SRC, x), dn::arg(DNNL_ARG_DIFF_DST, dy),
               dn::arg(DNNL_ARG_SCALE, scale), dn::arg(DNNL_ARG_SHIFT, shift),
               dn::arg(DNNL_ARG_MEAN, mean), dn::arg(DNNL_ARG_VARIANCE, var),
               dn::arg(DNNL_ARG_DIFF_SRC, dx), dn::arg(DNNL_ARG_DIFF_SCALE, dscale),
               dn::arg(DNNL_ARG_DIFF_SHIFT, dshift)});
  return {dx, dscale, dshift};
}

// ---- reference loops over plain [N, C, S], parallel over channels

template <typename T>
std::vector<Tensor> bn_forward_ref(const std::vector<Tensor>& in, bool training, double momentum,
                                   double eps, bool relu) {
  Tensor x = in[0].contiguous();
  BnGeometry g(x.shape());
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  Tensor mean = training ? Tensor::empty({g.C}, x.dtype()) : in[3].contiguous();
  Tensor var = training ? Tensor::empty({g.C}, x.dtype()) : in[4].contiguous();
  Tensor w = in[1].defined() ? in[1].contiguous() : Tensor();
  Tensor b = in[2].defined() ? in[2].contiguous() : Tensor();
  const T* px = x.data<T>();
  T* py = y.data<T>();
  T* pm = mean.data<T>();
  T* pv = var.data<T>();
  parallel_for(g.C, 1, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      if (training) {  // two passes: mean, then the centred sum of squares
        double s = 0;
        for (int64_t n = 0; n < g.N; ++n) {
          const T* p = px + (n * g.C + c) * g.S;
          T acc = 0;
#pragma omp simd reduction(+ : acc)
          for (int64_t i = 0; i < g.S; ++i) acc += p[i];
          s += double(acc);
        }
        T m = T(s / double(g.count()));
        double ss = 0;
        for (int64_t n = 0; n < g.N; ++n) {
          const T* p = px + (n * g.C + c) * g.S;
          T acc = 0;
#pragma omp simd reduction(+ : acc)
          for (int64_t i = 0; i < g.S; ++i) acc += (p[i] - m) * (p[i] - m);
          ss += double(acc);
        }
        pm[c] = m;
        pv[c] = T(ss / double(g.count()));
      }
      T rstd = T(1.0 / std::sqrt(double(pv[c]) + eps));
      T scale = (w.defined() ? w.data<T>()[c] : T(1)) * rstd;
      T shift = (b.defined() ? b.data<T>()[c] : T(0)) - pm[c] * scale;
      for (int64_t n = 0; n < g.N; ++n) {
        const T* p = px + (n * g.C + c) * g.S;
        T* q = py + (n * g.C + c) * g.S;
#pragma omp simd
        for (int64_t i = 0; i < g.S; ++i) q[i] = p[i] * scale + shift;
        if (relu)
#pragma omp simd
          for (int64_t i = 0; i < g.S; ++i) q[i] = Relu{}(q[i]);
      }
    }
  });
  if (training) update_running<T>(in[3], in[4], pm, pv, g, momentum);
  return {y, mean, var};
}

// relu_y: batch_norm_relu's output y; dy is first masked as relu_backward(dy, y) does.
template <typename T>
std::vector<Tensor> bn_backward_ref(const std::vector<Tensor>& in, bool training, double eps,
                                    const Tensor& relu_y = Tensor()) {
  Tensor dy = in[0].contiguous(), x = in[1].contiguous();
  if (relu_y.defined()) {
    Tensor y = relu_y.contiguous(), masked = Tensor::empty(dy.shape(), dy.dtype());
    const T* py = y.data<T>();
    const T* pd = dy.data<T>();
    T* pm = masked.data<T>();
    for (int64_t i = 0; i < dy.numel(); ++i) pm[i] = ReluBackward{}(pd[i], py[i]);
    dy = masked;
  }
  BnGeometry g(x.shape());
  Tensor w = in[2].defined() ? in[2].contiguous() : Tensor();
  Tensor mean = in[3].contiguous(), var = in[4].contiguous();
  Tensor dx = Tensor::empty(x.shape(), x.dtype());
  Tensor dw = Tensor::empty({g.C}, x.dtype()), db = Tensor::empty({g.C}, x.dtype());
  const T* pdy = dy.data<T>();
  const T* px = x.data<T>();
  T* pdx = dx.data<T>();
  parallel_for(g.C, 1, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      const T m = mean.data<T>()[c];
      const T rstd = T(1.0 / std::sqrt(double(var.data<T>()[c]) + eps));
      double sum_dy = 0, sum_dy_xhat = 0;
      for (int64_t n = 0; n < g.N; ++n) {
        const T* p = px + (n * g.C + c) * g.S;
        const T* d = pdy + (n * g.C + c) * g.S;
        T a = 0, b = 0;
#pragma omp simd reduction(+ : a, b)
        for (int64_t i = 0; i < g.S; ++i) {
          a += d[i];
          b += d[i] * (p[i] - m);
        }
        sum_dy += double(a);
        sum_dy_xhat += double(b) * double(rstd);
      }
      const T gamma = w.defined() ? w.data<T>()[c] : T(1);
      dw.data<T>()[c] = T(sum_dy_xhat);
      db.data<T>()[c] = T(sum_dy);
      // training: dx = gamma * rstd * (dy - mean(dy) - xhat * mean(dy * xhat))
      // eval (running stats are constants): dx = gamma * rstd * dy
      const T k = gamma * rstd;
      const T mean_dy = training ? T(sum_dy / double(g.count())) : T(0);
      const T mean_dy_xhat = training ? T(sum_dy_xhat / double(g.count())) : T(0);
      for (int64_t n = 0; n < g.N; ++n) {
        const T* p = px + (n * g.C + c) * g.S;
        const T* d = pdy + (n * g.C + c) * g.S;
        T* o = pdx + (n * g.C + c) * g.S;
#pragma omp simd
        for (int64_t i = 0; i < g.S; ++i)
          o[i] = k * (d[i] - mean_dy - (p[i] - m) * rstd * mean_dy_xhat);
      }
    }
  });
  return {dx, dw, db};
}

// Which float32 implementation runs. Plain: the channel loops, faster than oneDNN's plain-format
// batch norm on ResNet shapes. Blocked [N][C/B][H][W][B]: the channel-block loops, a little
// slower than oneDNN's blocked batch norm single-threaded but without its spin barriers, which
// stall for whole time slices when the cores are shared.
// BatchNormAttrs::impl forces one (tests, benchmarks).
enum class BnImpl { kLoops, kBlockedLoops, kOnednn };

BnImpl bn_impl(const Tensor& x, const BatchNormAttrs& attrs) {
  const bool onednn = attrs.impl == BatchNormImpl::kOnednn;
  if (x.dtype() != DType::f32 || (!x.has_layout() && !onednn)) return BnImpl::kLoops;
  if (!onednn && channel_block(x) > 0) return BnImpl::kBlockedLoops;
  return BnImpl::kOnednn;
}

// batch_norm(x, weight?, bias?, running_mean?, running_var?; training, momentum, eps)
//   -> {y, mean, var} (batch statistics in training, the running ones in eval; var biased);
// relu: batch_norm_relu, y = relu(batch norm).
std::vector<Tensor> bn_forward(const std::vector<Tensor>& in, const BatchNormAttrs& attrs,
                               bool relu) {
  const bool training = attrs.training;
  const double momentum = attrs.momentum, eps = attrs.eps;
  switch (bn_impl(in[0], attrs)) {
    case BnImpl::kOnednn:
      return bn_forward_f32(in, training, momentum, float(eps), relu);
    case BnImpl::kBlockedLoops:
      return bn_forward_blocked(in, training, momentum, eps, relu);
    case BnImpl::kLoops:
      break;
  }
  return visit_float(in[0].dtype(), "batch_norm", [&](auto tag) {
    return bn_forward_ref<decltype(tag)>(in, training, momentum, eps, relu);
  });
}

std::vector<Tensor> batch_norm_kernel(const std::vector<Tensor>& in, const BatchNormAttrs& attrs) {
  return bn_forward(in, attrs, false);
}

std::vector<Tensor> batch_norm_relu_kernel(const std::vector<Tensor>& in,
                                           const BatchNormAttrs& attrs) {
  return bn_forward(in, attrs, true);
}

// batch_norm_backward(dy, x, weight?, mean, var; training, eps) -> {dx, dweight, dbias}; relu_y:
// batch_norm_relu_backward, dy masked by relu's output y first.
std::vector<Tensor> bn_backward(const std::vector<Tensor>& in, const BatchNormAttrs& attrs,
                                const Tensor& relu_y) {
  const bool training = attrs.training;
  const double eps = attrs.eps;
  switch (bn_impl(in[1], attrs)) {
    case BnImpl::kOnednn: {
      if (!relu_y.defined()) return bn_backward_f32(in, training, float(eps));
      std::vector<Tensor> masked = in;
      masked[0] = dispatch::call1<OpId::relu_backward>({in[0], relu_y});
      return bn_backward_f32(masked, training, float(eps));
    }
    case BnImpl::kBlockedLoops:
      return bn_backward_blocked(in, training, eps, relu_y);
    case BnImpl::kLoops:
      break;
  }
  return visit_float(in[1].dtype(), "batch_norm_backward", [&](auto tag) {
    return bn_backward_ref<decltype(tag)>(in, training, eps, relu_y);
  });
}

std::vector<Tensor> batch_norm_backward_kernel(const std::vector<Tensor>& in,
                                               const BatchNormAttrs& attrs) {
  return bn_backward(in, attrs, Tensor());
}

// batch_norm_relu_backward(dy, x, weight?, mean, var, y)
std::vector<Tensor> batch_norm_relu_backward_kernel(const std::vector<Tensor>& in,
                                                    const BatchNormAttrs& attrs) {
  ZENITH_CHECK(in.size() == 6 && in[5].defined(),
               "[batch_norm_relu_backward] expected (dy, x, weight, mean, var, y)");
  return bn_backward({in[0], in[1], in[2], in[3], in[4]}, attrs, in[5]);
}

ZENITH_REGISTER_KERNEL(batch_norm, CPU, batch_norm_kernel);
ZENITH_REGISTER_KERNEL(batch_norm_backward, CPU, batch_norm_backward_kernel);
ZENITH_REGISTER_KERNEL(batch_norm_relu, CPU, batch_norm_relu_kernel);
ZENITH_REGISTER_KERNEL(batch_norm_relu_backward, CPU, batch_norm_relu_backward_kernel);
ZENITH_LAYOUT_AWARE(batch_norm);
ZENITH_LAYOUT_AWARE(batch_norm_backward);
ZENITH_LAYOUT_AWARE(batch_norm_relu);
ZENITH_LAYOUT_AWARE(batch_norm_relu_backward);

}  // namespace
}  // namespace zenith::cpu
