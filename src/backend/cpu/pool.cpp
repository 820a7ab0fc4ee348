// Pooling kernels: float32 max/avg pooling through oneDNN (in the input's own format, so blocked
// activations stay blocked; max pooling keeps oneDNN's workspace for its backward), float64 and
// adaptive pooling through reference loops. The gradient kernels are the fast paths of the
// decompositions in src/ops/pool.cpp.
#include <algorithm>
#include <limits>

#include "backend/cpu/loops.h"
#include "backend/cpu/max_pool_2x2.h"
#include "backend/cpu/onednn.h"
#include "core/dispatch.h"

namespace zenith::cpu {
namespace {

namespace dn = onednn;
using dnnl::memory;

// N batch, C channels, H x W input, KH x KW window, SH x SW stride, PH x PW padding
// (both sides), OH x OW output: x's shape and the window ops::max_pool2d / avg_pool2d resolved.
struct PoolGeometry {
  int64_t N, C, H, W, KH, KW, SH, SW, PH, PW, OH, OW;

  PoolGeometry(const Shape& x, const Pool2dAttrs& a)
      : N(x[0]),
        C(x[1]),
        H(x[2]),
        W(x[3]),
        KH(a.kernel[0]),
        KW(a.kernel[1]),
        SH(a.stride[0]),
        SW(a.stride[1]),
        PH(a.padding[0]),
        PW(a.padding[1]),
        OH(a.output_size[0]),
        OW(a.output_size[1]) {}
  Shape x_shape() const { return {N, C, H, W}; }
  Shape y_shape() const { return {N, C, OH, OW}; }
};

// ---- float32: oneDNN

// The format x is (or will be) stored in: its layout, else dense NCHW.
memory::desc src_desc_of(const Tensor& x) {
  return x.has_layout() ? dn::desc_of(x) : dn::plain_desc(x.shape(), x.dtype());
}

struct PoolFwd {
  dnnl::pooling_forward::primitive_desc pd;
  dn::Primitive prim;
};

std::shared_ptr<PoolFwd> pool_fwd(dnnl::algorithm alg, bool training, const memory::desc& src,
                                  const PoolGeometry& g) {
  std::string key = dn::Key("pool_fwd")
                        .add(int64_t(alg))
                        .add(int64_t(training))
                        .add(src)
                        .add({g.KH, g.KW, g.SH, g.SW, g.PH, g.PW})
                        .str();
  return dn::cached<PoolFwd>(key, [&] {
    memory::desc dst(dn::dims_of(g.y_shape()), memory::data_type::f32, memory::format_tag::any);
    dnnl::pooling_forward::desc d(
        training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference, alg, src,
        dst, {g.SH, g.SW}, {g.KH, g.KW}, {g.PH, g.PW}, {g.PH, g.PW});
    auto e = std::make_shared<PoolFwd>();
    e->pd = dnnl::pooling_forward::primitive_desc(d, dn::engine());
    e->prim = dn::Primitive(dnnl::pooling_forward(e->pd));
    return e;
  });
}

// -> {y, workspace (max pooling in training only; raw bytes)}
std::vector<Tensor> pool_forward_f32(const Tensor& xin, dnnl::algorithm alg, bool training,
                                     const PoolGeometry& g) {
  Tensor x = xin.has_layout() ? xin : xin.contiguous();
  auto e = pool_fwd(alg, training, dn::desc_of(x), g);
  Tensor y = dn::empty_in(g.y_shape(), DType::f32, e->pd.dst_desc());
  std::vector<dn::Arg> args = {dn::arg(DNNL_ARG_SRC, x), dn::arg(DNNL_ARG_DST, y)};
  Tensor ws;
  if (training && alg == dnnl::algorithm::pooling_max) {
    memory::desc wd = e->pd.workspace_desc();
    ws = Tensor::empty({int64_t(wd.get_size())}, DType::u8);
    args.push_back(dn::arg(DNNL_ARG_WORKSPACE, ws, wd));
  }
  e->prim.run(args);
  return {dn::finish_output(y), ws};
}

struct PoolBwd {
  dnnl::pooling_backward::primitive_desc pd;
  dn::Primitive prim;
};

// dx from dy; x supplies the shape and format of the forward input.
Tensor pool_backward_f32(const Tensor& dy, const Tensor& x, const Tensor& ws, dnnl::algorithm alg,
                         const PoolGeometry& g) {
  memory::desc src = src_desc_of(x);
  auto fwd = pool_fwd(alg, true, src, g);
  std::string key = dn::Key("pool_bwd")
                        .add(int64_t(alg))
                        .add(src)
                        .add({g.KH, g.KW, g.SH, g.SW, g.PH, g.PW})
                        .str();
  auto e = dn::cached<PoolBwd>(key, [&] {
    dnnl::pooling_backward::desc d(alg, src, fwd->pd.dst_desc(), {g.SH, g.SW}, {g.KH, g.KW},
                                   {g.PH, g.PW}, {g.PH, g.PW});
    auto e = std::make_shared<PoolBwd>();
    e->pd = dnnl::pooling_backward::primitive_desc(d, dn::engine(), fwd->pd);
    e->prim = dn::Primitive(dnnl::pooling_backward(e->pd));
    return e;
  });
  Tensor ddst = dn::to_desc(dy, e->pd.diff_dst_desc());
  Tensor dsrc = dn::empty_in(g.x_shape(), DType::f32, e->pd.diff_src_desc());
  std::vector<dn::Arg> args = {dn::arg(DNNL_ARG_DIFF_DST, ddst), dn::arg(DNNL_ARG_DIFF_SRC, dsrc)};
  if (alg == dnnl::algorithm::pooling_max) {
    ZENITH_CHECK(ws.defined(), "[max_pool2d_backward] forward ran without a workspace");
    args.push_back(dn::arg(DNNL_ARG_WORKSPACE, ws, e->pd.workspace_desc()));
  }
  e->prim.run(args);
  return dn::finish_output(dsrc);
}

// ---- float32 2x2 stride-2 max pooling on nChw8c (an AVX2 fast path, max_pool_2x2.cpp)

bool use_own_max_pool(const Tensor& x, const Pool2dAttrs& a) {
  return max_pool_2x2_fits(x.shape(), a, x.dtype()) && use_avx2_fast_paths();
}

// ---- reference loops (float64), one (n, c) plane per task

template <typename T>
std::vector<Tensor> max_pool_ref(const Tensor& xin, const PoolGeometry& g) {
  Tensor x = xin.contiguous();
  Tensor y = Tensor::empty(g.y_shape(), x.dtype());
  Tensor idx = Tensor::empty(g.y_shape(), DType::i64);
  const T* px = x.data<T>();
  T* py = y.data<T>();
  int64_t* pi = idx.data<int64_t>();
  parallel_for(g.N * g.C, 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p)
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          T best = -std::numeric_limits<T>::infinity();
          int64_t arg = -1;
          for (int64_t kh = 0; kh < g.KH; ++kh) {
            int64_t ih = oh * g.SH - g.PH + kh;
            if (ih < 0 || ih >= g.H) continue;
            for (int64_t kw = 0; kw < g.KW; ++kw) {
              int64_t iw = ow * g.SW - g.PW + kw;
              if (iw < 0 || iw >= g.W) continue;
              T v = px[(p * g.H + ih) * g.W + iw];
              if (arg < 0 || v > best || v != v) {
                best = v;
                arg = ih * g.W + iw;
              }
            }
          }
          int64_t o = (p * g.OH + oh) * g.OW + ow;
          py[o] = best;
          pi[o] = arg;
        }
  });
  return {y, idx};
}

template <typename T>
Tensor max_pool_backward_ref(const Tensor& dyin, const Tensor& idx, const PoolGeometry& g) {
  Tensor dy = dyin.contiguous();
  Tensor dx = Tensor::zeros(g.x_shape(), dy.dtype());
  const T* pdy = dy.data<T>();
  const int64_t* pi = idx.data<int64_t>();
  T* pdx = dx.data<T>();
  parallel_for(g.N * g.C, 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p)
      for (int64_t o = 0; o < g.OH * g.OW; ++o) {
        int64_t i = pi[p * g.OH * g.OW + o];
        if (i >= 0) pdx[p * g.H * g.W + i] += pdy[p * g.OH * g.OW + o];
      }
  });
  return dx;
}

// Average pooling forward (dy == nullptr) or backward (scatters dy / divisor into dx).
template <typename T>
void avg_pool_ref(const T* x, T* y, const T* dy, T* dx, const PoolGeometry& g, bool include_pad) {
  parallel_for(g.N * g.C, 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p)
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        PoolWindow wh = pool_window(oh, g.KH, g.SH, g.PH, g.H);
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          PoolWindow ww = pool_window(ow, g.KW, g.SW, g.PW, g.W);
          int64_t count =
              include_pad ? wh.padded * ww.padded : (wh.end - wh.begin) * (ww.end - ww.begin);
          int64_t o = (p * g.OH + oh) * g.OW + ow;
          if (dy) {
            T v = count > 0 ? dy[o] / T(count) : T(0);
            for (int64_t ih = wh.begin; ih < wh.end; ++ih)
              for (int64_t iw = ww.begin; iw < ww.end; ++iw) dx[(p * g.H + ih) * g.W + iw] += v;
          } else {
            T s = 0;
            for (int64_t ih = wh.begin; ih < wh.end; ++ih)
              for (int64_t iw = ww.begin; iw < ww.end; ++iw) s += x[(p * g.H + ih) * g.W + iw];
            y[o] = count > 0 ? s / T(count) : T(0);
          }
        }
      }
  });
}

// ---- kernels

dnnl::algorithm avg_alg(const Pool2dAttrs& attrs) {
  return attrs.count_include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                 : dnnl::algorithm::pooling_avg_exclude_padding;
}

// max_pool2d(x; kernel, stride, padding, training) -> {y, workspace or indices}
std::vector<Tensor> max_pool2d_kernel(const std::vector<Tensor>& in, const Pool2dAttrs& attrs) {
  PoolGeometry g(in[0].shape(), attrs);
  if (attrs.training && use_own_max_pool(in[0], attrs)) return max_pool_2x2(in[0], attrs, 8, false);
  if (in[0].dtype() == DType::f32)
    return pool_forward_f32(in[0], dnnl::algorithm::pooling_max, attrs.training, g);
  return visit_float(in[0].dtype(), "max_pool2d",
                     [&](auto tag) { return max_pool_ref<decltype(tag)>(in[0], g); });
}

// max_pool2d_backward(dy, x, workspace) -> dx
std::vector<Tensor> max_pool2d_backward_kernel(const std::vector<Tensor>& in,
                                               const Pool2dAttrs& attrs) {
  PoolGeometry g(in[1].shape(), attrs);
  if (use_own_max_pool(in[1], attrs))
    return {max_pool_2x2_backward(in[0], in[2], in[1].shape(), attrs)};
  if (in[1].dtype() == DType::f32)
    return {pool_backward_f32(in[0], in[1], in[2], dnnl::algorithm::pooling_max, g)};
  return visit_float(in[1].dtype(), "max_pool2d_backward", [&](auto tag) {
    return std::vector<Tensor>{max_pool_backward_ref<decltype(tag)>(in[0], in[2], g)};
  });
}

// avg_pool2d(x; kernel, stride, padding, count_include_pad) -> y
std::vector<Tensor> avg_pool2d_kernel(const std::vector<Tensor>& in, const Pool2dAttrs& attrs) {
  PoolGeometry g(in[0].shape(), attrs);
  if (in[0].dtype() == DType::f32)
    return {pool_forward_f32(in[0], avg_alg(attrs), attrs.training, g)[0]};
  return visit_float(in[0].dtype(), "avg_pool2d", [&](auto tag) {
    using T = decltype(tag);
    Tensor x = in[0].contiguous();
    Tensor y = Tensor::empty(g.y_shape(), x.dtype());
    avg_pool_ref<T>(x.data<T>(), y.data<T>(), nullptr, nullptr, g, attrs.count_include_pad);
    return std::vector<Tensor>{y};
  });
}

// avg_pool2d_backward(dy, x) -> dx
std::vector<Tensor> avg_pool2d_backward_kernel(const std::vector<Tensor>& in,
                                               const Pool2dAttrs& attrs) {
  PoolGeometry g(in[1].shape(), attrs);
  if (in[1].dtype() == DType::f32)
    return {pool_backward_f32(in[0], in[1], Tensor(), avg_alg(attrs), g)};
  return visit_float(in[1].dtype(), "avg_pool2d_backward", [&](auto tag) {
    using T = decltype(tag);
    Tensor dy = in[0].contiguous();
    Tensor dx = Tensor::zeros(g.x_shape(), dy.dtype());
    avg_pool_ref<T>(nullptr, nullptr, dy.data<T>(), dx.data<T>(), g, attrs.count_include_pad);
    return std::vector<Tensor>{dx};
  });
}

// Adaptive average pooling (windows: core/shape.h).
template <typename T>
void adaptive_avg_ref(const T* x, T* y, const T* dy, T* dx, int64_t planes, int64_t H, int64_t W,
                      int64_t OH, int64_t OW) {
  parallel_for(planes, 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p)
      for (int64_t oh = 0; oh < OH; ++oh) {
        const PoolWindow wh = adaptive_pool_window(oh, H, OH);
        const int64_t h0 = wh.begin, h1 = wh.end;
        for (int64_t ow = 0; ow < OW; ++ow) {
          const PoolWindow ww = adaptive_pool_window(ow, W, OW);
          const int64_t w0 = ww.begin, w1 = ww.end;
          T count = T((h1 - h0) * (w1 - w0));
          int64_t o = (p * OH + oh) * OW + ow;
          if (dy) {
            T v = dy[o] / count;
            for (int64_t ih = h0; ih < h1; ++ih)
              for (int64_t iw = w0; iw < w1; ++iw) dx[(p * H + ih) * W + iw] += v;
          } else {
            T s = 0;
            for (int64_t ih = h0; ih < h1; ++ih)
              for (int64_t iw = w0; iw < w1; ++iw) s += x[(p * H + ih) * W + iw];
            y[o] = s / count;
          }
        }
      }
  });
}

// adaptive_avg_pool2d(x; output_size) -> y
std::vector<Tensor> adaptive_avg_pool2d_kernel(const std::vector<Tensor>& in,
                                               const AdaptivePool2dAttrs& attrs) {
  Tensor x = in[0].contiguous();
  const auto& os = attrs.output_size;
  const Shape& s = x.shape();
  Tensor y = Tensor::empty({s[0], s[1], os[0], os[1]}, x.dtype());
  visit_float(x.dtype(), "adaptive_avg_pool2d", [&](auto tag) {
    using T = decltype(tag);
    adaptive_avg_ref<T>(x.data<T>(), y.data<T>(), nullptr, nullptr, s[0] * s[1], s[2], s[3], os[0],
                        os[1]);
  });
  return {y};
}

// adaptive_avg_pool2d_backward(dy; input_shape) -> dx
std::vector<Tensor> adaptive_avg_pool2d_backward_kernel(const std::vector<Tensor>& in,
                                                        const AdaptivePool2dAttrs& attrs) {
  Tensor dy = in[0].contiguous();
  const Shape& s = attrs.input_shape;
  Tensor dx = Tensor::zeros(s, dy.dtype());
  visit_float(dy.dtype(), "adaptive_avg_pool2d_backward", [&](auto tag) {
    using T = decltype(tag);
    adaptive_avg_ref<T>(nullptr, nullptr, dy.data<T>(), dx.data<T>(), s[0] * s[1], s[2], s[3],
                        dy.size(2), dy.size(3));
  });
  return {dx};
}

ZENITH_REGISTER_KERNEL(max_pool2d, CPU, max_pool2d_kernel);
ZENITH_REGISTER_KERNEL(max_pool2d_backward, CPU, max_pool2d_backward_kernel);
ZENITH_REGISTER_KERNEL(avg_pool2d, CPU, avg_pool2d_kernel);
ZENITH_REGISTER_KERNEL(avg_pool2d_backward, CPU, avg_pool2d_backward_kernel);
ZENITH_REGISTER_KERNEL(adaptive_avg_pool2d, CPU, adaptive_avg_pool2d_kernel);
ZENITH_REGISTER_KERNEL(adaptive_avg_pool2d_backward, CPU, adaptive_avg_pool2d_backward_kernel);
ZENITH_LAYOUT_AWARE(max_pool2d);
ZENITH_LAYOUT_AWARE(max_pool2d_backward);
ZENITH_LAYOUT_AWARE(avg_pool2d);
ZENITH_LAYOUT_AWARE(avg_pool2d_backward);

}  // namespace
}  // namespace zenith::cpu
