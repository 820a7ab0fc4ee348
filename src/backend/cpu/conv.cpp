// conv2d kernels: float32 through oneDNN convolution primitives (blocked layouts chosen by
// oneDNN, primitives cached per shape), float64 through im2col + dgemm as the reference. The
// two gradient kernels are the fast paths of the decompositions in src/ops/conv.cpp.
// The weight-gradient fast paths and the float64 reference are in their own files (conv.h).
#include "backend/cpu/conv.h"

#include <algorithm>
#include <string>
#include <utility>

#include "backend/cpu/gemm.h"
#include "backend/cpu/loops.h"
#include "backend/cpu/onednn.h"
#include "core/dispatch.h"

namespace zenith::cpu {
namespace {

namespace dn = onednn;
using dnnl::memory;

// ---- float32: oneDNN

memory::desc any_desc(const dn::Dims& dims) {
  return memory::desc(dims, memory::data_type::f32, memory::format_tag::any);
}

}  // namespace

// Winograd F(4x4, 3x3) is used for 3x3, stride-1, undilated, ungrouped convs with 64..256 input
// and output channels at a batch of 8 or more ("auto"); "winograd" forces it where oneDNN supports
// the shape, "direct" never uses it. It was faster on ResNet's 64..256-channel convs at batch 32,
// slower for 512-channel and small ones. The choice is a fixed
// rule, not a timing, so a run (and a resumed run) is reproducible. Its rounding (~1e-6 relative
// per conv) is amplified by batch norm over tiny batches, hence the batch bound.
bool winograd_candidate(const ConvGeometry& g) {
  const std::string& algo = conv_algorithm();
  if (algo == "direct") return false;
  bool shape_ok = g.G == 1 && g.KH == 3 && g.KW == 3 && g.stride[0] == 1 && g.stride[1] == 1 &&
                  g.dilation[0] == 1 && g.dilation[1] == 1;
  if (algo == "winograd") return shape_ok;
  return shape_ok && g.N >= 8 && g.C >= 64 && g.C <= 256 && g.O >= 64 && g.O <= 256;
}

namespace {

// One conv direction for one shape: Winograd where the rule above picks it and oneDNN has an
// implementation, else direct.
template <typename PD, typename P>
struct ConvPrimitive {
  PD pd;
  dn::Primitive prim;

  // make(algorithm) -> PD; throws dnnl::error when oneDNN has no implementation.
  template <typename Make>
  ConvPrimitive(const ConvGeometry& g, Make&& make) {
    bool made = false;
    if (winograd_candidate(g)) {
      try {
        pd = make(dnnl::algorithm::convolution_winograd);
        made = true;
      } catch (const dnnl::error&) {
        // unsupported (e.g. channels not a multiple of 16): direct
      }
    }
    if (!made) pd = make(dnnl::algorithm::convolution_direct);
    prim = dn::Primitive(P(pd));
  }
};

using ConvFwd = ConvPrimitive<dnnl::convolution_forward::primitive_desc, dnnl::convolution_forward>;
using ConvBwdData =
    ConvPrimitive<dnnl::convolution_backward_data::primitive_desc, dnnl::convolution_backward_data>;
using ConvBwdWeights = ConvPrimitive<dnnl::convolution_backward_weights::primitive_desc,
                                     dnnl::convolution_backward_weights>;

memory::desc bias_desc(const ConvGeometry& g) {
  return g.bias ? memory::desc({g.O}, memory::data_type::f32, memory::format_tag::a)
                : memory::desc();
}

// relu: a ReLU post-op on the output (conv2d_relu, graph mode's Conv+ReLU fusion).
dnnl::convolution_forward::primitive_desc fwd_pd(const ConvGeometry& g, dnnl::algorithm alg,
                                                 bool relu = false) {
  dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_training, alg,
                                    any_desc(dn::dims_of(g.x_shape())), any_desc(g.w_dims()),
                                    bias_desc(g), any_desc(dn::dims_of(g.y_shape())), g.stride,
                                    g.dnnl_dilation(), g.pad_l, g.pad_r);
  dnnl::primitive_attr attr;
  if (relu) {
    dnnl::post_ops post;
    post.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    attr.set_post_ops(post);
  }
  return dnnl::convolution_forward::primitive_desc(d, attr, dn::engine());
}

std::shared_ptr<ConvFwd> conv_fwd(const ConvGeometry& g, bool relu) {
  return dn::cached<ConvFwd>(g.key(relu ? "conv_relu_fwd" : "conv_fwd").str(), [&] {
    return std::make_shared<ConvFwd>(g, [&](dnnl::algorithm alg) { return fwd_pd(g, alg, relu); });
  });
}

// A contiguous weight [O, C/G, KH, KW] in oneDNN's (possibly grouped) plain descriptor.
memory::desc plain_weight_desc(const ConvGeometry& g) {
  return memory::desc(g.w_dims(), memory::data_type::f32,
                      g.G == 1 ? memory::format_tag::oihw : memory::format_tag::goihw);
}

// The weight reordered to `want` (a copy only when the formats differ).
Tensor weight_in(const Tensor& w, const ConvGeometry& g, const memory::desc& want) {
  Tensor wc = w.contiguous();
  memory::desc have = plain_weight_desc(g);
  if (have == want) return wc;
  Tensor out = dn::empty_in(wc.shape(), DType::f32, want);
  dn::reorder(wc, have, out, want);
  return out;
}

Tensor conv_forward_f32(const Tensor& x, const Tensor& w, const Tensor& bias, const ConvGeometry& g,
                        bool relu) {
  auto e = conv_fwd(g, relu);
  const auto& pd = e->pd;
  Tensor src = dn::to_desc(x, pd.src_desc());
  Tensor wt = weight_in(w, g, pd.weights_desc());
  Tensor dst = dn::empty_in(g.y_shape(), DType::f32, pd.dst_desc());
  std::vector<dn::Arg> args = {dn::arg(DNNL_ARG_SRC, src),
                               dn::arg(DNNL_ARG_WEIGHTS, wt, pd.weights_desc()),
                               dn::arg(DNNL_ARG_DST, dst)};
  Tensor b;
  if (g.bias) {
    b = bias.contiguous();
    args.push_back(dn::arg(DNNL_ARG_BIAS, b));
  }
  e->prim.run(args);
  return dn::finish_output(dst);
}

Tensor conv_backward_data_f32(const Tensor& dy, const Tensor& w, const ConvGeometry& g) {
  auto e = dn::cached<ConvBwdData>(g.key("conv_bwd_data").str(), [&] {
    auto hint = fwd_pd(g, dnnl::algorithm::convolution_direct);
    return std::make_shared<ConvBwdData>(g, [&](dnnl::algorithm alg) {
      dnnl::convolution_backward_data::desc d(
          alg, any_desc(dn::dims_of(g.x_shape())), any_desc(g.w_dims()),
          any_desc(dn::dims_of(g.y_shape())), g.stride, g.dnnl_dilation(), g.pad_l, g.pad_r);
      return dnnl::convolution_backward_data::primitive_desc(d, dn::engine(), hint);
    });
  });
  const auto& pd = e->pd;
  Tensor ddst = dn::to_desc(dy, pd.diff_dst_desc());
  Tensor wt = weight_in(w, g, pd.weights_desc());
  Tensor dsrc = dn::empty_in(g.x_shape(), DType::f32, pd.diff_src_desc());
  e->prim.run({dn::arg(DNNL_ARG_DIFF_DST, ddst), dn::arg(DNNL_ARG_WEIGHTS, wt, pd.weights_desc()),
               dn::arg(DNNL_ARG_DIFF_SRC, dsrc)});
  return dn::finish_output(dsrc);
}
std::vector<Tensor> conv_backward_weights_f32(const Tensor& dy, const Tensor& x,
                                              const ConvGeometry& g) {
  if (use_few_channel_grad(g)) return conv_backward_weights_few_channels(dy, x, g);
  if (use_blocked_grad(g)) return conv_backward_weights_blocked(dy, x, g);
  auto e = dn::cached<ConvBwdWeights>(g.key("conv_bwd_weights").str(), [&] {
    auto hint = fwd_pd(g, dnnl::algorithm::convolution_direct);
    return std::make_shared<ConvBwdWeights>(g, [&](dnnl::algorithm alg) {
      dnnl::convolution_backward_weights::desc d(
          alg, any_desc(dn::dims_of(g.x_shape())), any_desc(g.w_dims()), bias_desc(g),
          any_desc(dn::dims_of(g.y_shape())), g.stride, g.dnnl_dilation(), g.pad_l, g.pad_r);
      return dnnl::convolution_backward_weights::primitive_desc(d, dn::engine(), hint);
    });
  });
  const auto& pd = e->pd;
  Tensor src = dn::to_desc(x, pd.src_desc());
  Tensor ddst = dn::to_desc(dy, pd.diff_dst_desc());
  memory::desc dw_desc = pd.diff_weights_desc();
  memory::desc plain_w = plain_weight_desc(g);
  // Write straight into the plain gradient when oneDNN chose the plain format.
  Tensor dw = Tensor::empty(g.w_shape(), DType::f32);
  Tensor dw_blocked = dw_desc == plain_w ? dw : dn::empty_in(g.w_shape(), DType::f32, dw_desc);
  std::vector<dn::Arg> args = {dn::arg(DNNL_ARG_SRC, src), dn::arg(DNNL_ARG_DIFF_DST, ddst),
                               dn::arg(DNNL_ARG_DIFF_WEIGHTS, dw_blocked, dw_desc)};
  Tensor db;
  if (g.bias) {
    db = Tensor::empty({g.O}, DType::f32);
    args.push_back(dn::arg(DNNL_ARG_DIFF_BIAS, db));
  }
  e->prim.run(args);
  if (!dw_blocked.is_same(dw)) dn::reorder(dw_blocked, dw_desc, dw, plain_w);
  return {dw, db};
}
// ---- kernels

// conv2d(x, weight, bias?) -> y
std::vector<Tensor> conv2d_kernel(const std::vector<Tensor>& in, const Conv2dAttrs& attrs) {
  ConvGeometry g(attrs);
  if (in[0].dtype() == DType::f32) return {conv_forward_f32(in[0], in[1], in[2], g, false)};
  return visit_float(in[0].dtype(), "conv2d", [&](auto tag) {
    return std::vector<Tensor>{conv_forward_ref<decltype(tag)>(in[0], in[1], in[2], g)};
  });
}

// conv2d_relu(x, weight, bias?) -> relu(conv2d): float32 through oneDNN's ReLU post-op; the
// float64 reference applies relu to the reference convolution in place.
std::vector<Tensor> conv2d_relu_kernel(const std::vector<Tensor>& in, const Conv2dAttrs& attrs) {
  ConvGeometry g(attrs);
  if (in[0].dtype() == DType::f32) return {conv_forward_f32(in[0], in[1], in[2], g, true)};
  return visit_float(in[0].dtype(), "conv2d_relu", [&](auto tag) {
    using T = decltype(tag);
    Tensor y = conv_forward_ref<T>(in[0], in[1], in[2], g);
    T* p = y.data<T>();
    for (int64_t i = 0; i < y.numel(); ++i) p[i] = p[i] < T(0) ? T(0) : p[i];
    return std::vector<Tensor>{y};
  });
}

// conv2d_backward_data(dy, weight) -> dx
std::vector<Tensor> conv2d_backward_data_kernel(const std::vector<Tensor>& in,
                                                const Conv2dAttrs& attrs) {
  ConvGeometry g(attrs);
  if (in[0].dtype() == DType::f32) return {conv_backward_data_f32(in[0], in[1], g)};
  return visit_float(in[0].dtype(), "conv2d_backward_data", [&](auto tag) {
    return std::vector<Tensor>{conv_backward_data_ref<decltype(tag)>(in[0], in[1], g)};
  });
}

// conv2d_backward_weights(dy, x) -> dweight, dbias (undefined without a bias)
std::vector<Tensor> conv2d_backward_weights_kernel(const std::vector<Tensor>& in,
                                                   const Conv2dAttrs& attrs) {
  ConvGeometry g(attrs);
  if (in[0].dtype() == DType::f32) return conv_backward_weights_f32(in[0], in[1], g);
  return visit_float(in[0].dtype(), "conv2d_backward_weights", [&](auto tag) {
    return conv_backward_weights_ref<decltype(tag)>(in[0], in[1], g);
  });
}

ZENITH_REGISTER_KERNEL(conv2d, CPU, conv2d_kernel);
ZENITH_REGISTER_KERNEL(conv2d_backward_data, CPU, conv2d_backward_data_kernel);
ZENITH_REGISTER_KERNEL(conv2d_backward_weights, CPU, conv2d_backward_weights_kernel);
ZENITH_REGISTER_KERNEL(conv2d_relu, CPU, conv2d_relu_kernel);
ZENITH_LAYOUT_AWARE(conv2d);
ZENITH_LAYOUT_AWARE(conv2d_relu);
ZENITH_LAYOUT_AWARE(conv2d_backward_data);
ZENITH_LAYOUT_AWARE(conv2d_backward_weights);

}  // namespace

}  // namespace zenith::cpu
