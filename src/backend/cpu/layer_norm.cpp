// Layer norm and RMS norm kernels (the ops of src/ops/layer_norm.cpp): rows of D elements (the
// normalised trailing dims), rows in parallel, vectorised inner loops; weight/bias gradients
// reduced from per-thread partial sums. RMS norm also reads and writes bfloat16/float16,
// computing in float32.
#include <omp.h>

#include <cmath>

#include "backend/cpu/loops.h"
#include "backend/cpu/math_simd.h"
#include "core/dispatch.h"

namespace zenith::cpu {
namespace {

// R rows, D elements per row.
struct Rows {
  int64_t R, D;
  Rows(const Tensor& x, int64_t d) : R(x.numel() / std::max<int64_t>(d, 1)), D(d) {}
};

const int64_t kRowGrain = 16;
// Partial sums of a row reduction, as many as one AVX-512 register holds floats.
constexpr int64_t kLanes = 16;

// f(chunk, begin, end) over static chunks of [0, n), one per thread; the chunk index picks the
// partial-sum buffer a chunk accumulates parameter gradients into.
template <typename F>
int64_t chunked(int64_t n, F&& f) {
  int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(omp_get_max_threads(), n / kRowGrain));
  if (chunks == 1 || omp_in_parallel()) {
    f(int64_t(0), int64_t(0), n);
    return 1;
  }
#pragma omp parallel for schedule(static, 1) num_threads(int(chunks))
  for (int64_t c = 0; c < chunks; ++c) f(c, n * c / chunks, n * (c + 1) / chunks);
  return chunks;
}

// Per-chunk accumulators for the parameter gradients: `count` vectors of D per chunk.
template <typename T>
struct Partials {
  int64_t D, count;
  std::vector<T> buf;
  Partials(int64_t d, int64_t n)
      : D(d), count(n), buf(size_t(omp_get_max_threads() * n * d), T(0)) {}
  T* get(int64_t chunk, int64_t which) { return buf.data() + (chunk * count + which) * D; }
  void reduce_into(int64_t chunks, int64_t which, T* out) {
    for (int64_t j = 0; j < D; ++j) out[j] = T(0);
    for (int64_t c = 0; c < chunks; ++c) {
      const T* p = get(c, which);
      for (int64_t j = 0; j < D; ++j) out[j] += p[j];
    }
  }
};

// layer_norm(x, weight?, bias?; D, eps) -> {y, mean [R], rstd [R]}
template <typename T>
std::vector<Tensor> layer_norm_fwd(const std::vector<Tensor>& in, int64_t D, double eps) {
  Tensor x = in[0].contiguous();
  Tensor w = in[1].defined() ? in[1].contiguous() : Tensor();
  Tensor b = in[2].defined() ? in[2].contiguous() : Tensor();
  Rows r(x, D);
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  Tensor mean = Tensor::empty({r.R}, x.dtype()), rstd = Tensor::empty({r.R}, x.dtype());
  const T* px = x.data<T>();
  const T* pw = w.defined() ? w.data<T>() : nullptr;
  const T* pb = b.defined() ? b.data<T>() : nullptr;
  T* py = y.data<T>();
  T* pm = mean.data<T>();
  T* ps = rstd.data<T>();
  parallel_for(r.R, kRowGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const T* p = px + i * D;
      T* q = py + i * D;
      T s = 0;
#pragma omp simd reduction(+ : s)
      for (int64_t j = 0; j < D; ++j) s += p[j];
      const T m = s / T(D);
      T ss = 0;
#pragma omp simd reduction(+ : ss)
      for (int64_t j = 0; j < D; ++j) ss += (p[j] - m) * (p[j] - m);
      const T rs = T(1) / std::sqrt(ss / T(D) + T(eps));
      pm[i] = m;
      ps[i] = rs;
#pragma omp simd
      for (int64_t j = 0; j < D; ++j) {
        T v = (p[j] - m) * rs;
        if (pw) v *= pw[j];
        if (pb) v += pb[j];
        q[j] = v;
      }
    }
  });
  return {y, mean, rstd};
}

// layer_norm_backward(dy, x, weight?, mean, rstd; D) -> {dx, dweight, dbias}
// dx = rstd * (dxh - mean(dxh) - xhat * mean(dxh * xhat)), dxh = dy * weight
template <typename T>
std::vector<Tensor> layer_norm_bwd(const std::vector<Tensor>& in, int64_t D) {
  Tensor dy = in[0].contiguous(), x = in[1].contiguous();
  Tensor w = in[2].defined() ? in[2].contiguous() : Tensor();
  Tensor mean = in[3].contiguous(), rstd = in[4].contiguous();
  Rows r(x, D);
  Tensor dx = Tensor::empty(x.shape(), x.dtype());
  Tensor dw = Tensor::empty({D}, x.dtype()), db = Tensor::empty({D}, x.dtype());
  const T* pdy = dy.data<T>();
  const T* px = x.data<T>();
  std::vector<T> ones(w.defined() ? 0 : size_t(D), T(1));  // as in rms_norm_bwd
  const T* pw = w.defined() ? w.data<T>() : ones.data();
  const T* pm = mean.data<T>();
  const T* ps = rstd.data<T>();
  T* pdx = dx.data<T>();
  Partials<T> part(D, 2);
  int64_t chunks = chunked(r.R, [&](int64_t chunk, int64_t begin, int64_t end) {
    T* __restrict acc_w = part.get(chunk, 0);
    T* __restrict acc_b = part.get(chunk, 1);
    for (int64_t i = begin; i < end; ++i) {
      const T* p = px + i * D;
      const T* d = pdy + i * D;
      T* o = pdx + i * D;
      const T m = pm[i], rs = ps[i];
      // The sums of dxh and dxh * xhat in kLanes partial sums each (see rms_norm_bwd).
      T la[kLanes] = {}, lc[kLanes] = {};
      int64_t j = 0;
      for (; j + kLanes <= D; j += kLanes)
        for (int64_t l = 0; l < kLanes; ++l) {
          const T dxh = d[j + l] * pw[j + l];
          la[l] += dxh;
          lc[l] += dxh * ((p[j + l] - m) * rs);
        }
      T a = 0, c = 0;
      for (; j < D; ++j) {
        const T dxh = d[j] * pw[j];
        a += dxh;
        c += dxh * ((p[j] - m) * rs);
      }
      for (int64_t l = 0; l < kLanes; ++l) {
        a += la[l];
        c += lc[l];
      }
#pragma omp simd
      for (int64_t k = 0; k < D; ++k) {
        acc_w[k] += d[k] * ((p[k] - m) * rs);
        acc_b[k] += d[k];
      }
      a /= T(D);
      c /= T(D);
#pragma omp simd
      for (int64_t k = 0; k < D; ++k) {
        T xh = (p[k] - m) * rs;
        o[k] = rs * (d[k] * pw[k] - a - xh * c);
      }
    }
  });
  part.reduce_into(chunks, 0, dw.data<T>());
  part.reduce_into(chunks, 1, db.data<T>());
  return {dx, dw, db};
}

// RMS norm computes in C: double for double inputs, else float (16-bit inputs included).
template <typename TX>
using NormCompute = std::conditional_t<std::is_same_v<TX, double>, double, float>;

// v rounded to TX and back: Hugging Face casts the normalised row to x's dtype before * weight.
template <typename TX, typename C>
ZENITH_SIMD_INLINE C round_to(C v) {
  if constexpr (std::is_same_v<TX, C>)
    return v;
  else
    return C(load(store<TX>(v)));
}

// The weight [D] in the compute type (a copy of D elements when it is 16-bit), or undefined.
template <typename C>
Tensor compute_weight(const Tensor& w) {
  if (!w.defined()) return w;
  return w.dtype() == DTypeOf<C>::value ? w.contiguous() : w.to(DTypeOf<C>::value);
}

// rms_norm(x, weight?; D, eps) -> {y, rstd [R]}: y = round_TX(x rstd) weight in TO, rstd =
// 1/sqrt(mean(x^2)+eps) in the compute type. With `residual` (add_rms_norm): inputs (a, b,
// weight?), x = a + b row by row (each row summed, then normalised while in cache) -> {x, y, rstd}.
template <typename TX, typename TO>
std::vector<Tensor> rms_norm_fwd(const std::vector<Tensor>& in, int64_t D, double eps,
                                 bool residual = false) {
  using C = NormCompute<TX>;
  Tensor x = residual ? Tensor::empty(in[0].shape(), in[0].dtype()) : in[0].contiguous();
  Tensor a = residual ? in[0].contiguous() : Tensor(), b = residual ? in[1].contiguous() : Tensor();
  Tensor w = compute_weight<C>(in[residual ? 2 : 1]);
  Rows r(x, D);
  Tensor y = Tensor::empty(x.shape(), DTypeOf<TO>::value);
  Tensor rstd = Tensor::empty({r.R}, DTypeOf<C>::value);
  TX* px = x.data<TX>();
  const TX* pa = residual ? a.data<TX>() : nullptr;
  const TX* pb = residual ? b.data<TX>() : nullptr;
  const C* pw = w.defined() ? w.data<C>() : nullptr;
  TO* py = y.data<TO>();
  C* ps = rstd.data<C>();
  parallel_for(r.R, kRowGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const TX* p = px + i * D;
      TO* q = py + i * D;
      if (residual) {
        TX* sum = px + i * D;
        const TX* ra = pa + i * D;
        const TX* rb = pb + i * D;
#pragma omp simd
        for (int64_t j = 0; j < D; ++j) sum[j] = store<TX>(C(load(ra[j])) + C(load(rb[j])));
      }
      C ss = 0;
#pragma omp simd reduction(+ : ss)
      for (int64_t j = 0; j < D; ++j) ss += C(load(p[j])) * C(load(p[j]));
      const C rs = C(1) / std::sqrt(ss / C(D) + C(eps));
      ps[i] = rs;
      if (pw) {
#pragma omp simd
        for (int64_t j = 0; j < D; ++j) q[j] = store<TO>(round_to<TX>(C(load(p[j])) * rs) * pw[j]);
      } else {
#pragma omp simd
        for (int64_t j = 0; j < D; ++j) q[j] = store<TO>(round_to<TX>(C(load(p[j])) * rs));
      }
    }
  });
  if (residual) return {x, y, rstd};
  return {y, rstd};
}

// rms_norm_backward(dy, x, weight?, rstd; D) -> {dx (x's dtype), dweight (weight's dtype)}
// dx = rstd * (dxh - xhat * mean(dxh * xhat)), dxh = dy * weight, xhat = x * rstd. A fifth
// input dres (rms_norm_add_backward: the residual stream's gradient) is added to dx in the same
// pass.
template <typename TX, typename TO>
std::vector<Tensor> rms_norm_bwd(const std::vector<Tensor>& in, int64_t D) {
  using C = NormCompute<TX>;
  Tensor dy =
      in[0].dtype() == DTypeOf<TO>::value ? in[0].contiguous() : in[0].to(DTypeOf<TO>::value);
  Tensor x = in[1].contiguous();
  Tensor w = compute_weight<C>(in[2]);
  Tensor rstd = in[3].contiguous();
  Tensor dres = in.size() > 4 ? in[4].contiguous() : Tensor();
  const TX* pr = dres.defined() ? dres.data<TX>() : nullptr;
  Rows r(x, D);
  Tensor dx = Tensor::empty(x.shape(), x.dtype());
  Tensor dw = Tensor::empty({D}, DTypeOf<C>::value);
  const TO* pdy = dy.data<TO>();
  const TX* px = x.data<TX>();
  // Without a weight, ones: the loops below then have no branch and vectorise (the row's
  // reduction ran as a scalar chain with one; dy * 1 is exact, so the results are unchanged).
  std::vector<C> ones(w.defined() ? 0 : size_t(D), C(1));
  const C* pw = w.defined() ? w.data<C>() : ones.data();
  const C* ps = rstd.data<C>();
  TX* pdx = dx.data<TX>();
  Partials<C> part(D, 1);
  int64_t chunks = chunked(r.R, [&](int64_t chunk, int64_t begin, int64_t end) {
    C* __restrict acc_w = part.get(chunk, 0);
    for (int64_t i = begin; i < end; ++i) {
      const TX* p = px + i * D;
      const TO* d = pdy + i * D;
      TX* o = pdx + i * D;
      const C rs = ps[i];
      // The row's sum in kLanes partial sums (GCC left `omp simd reduction` here a scalar add
      // chain: one dependent add per element).
      C lane[kLanes] = {};
      int64_t j = 0;
      for (; j + kLanes <= D; j += kLanes)
        for (int64_t l = 0; l < kLanes; ++l)
          lane[l] += C(load(d[j + l])) * pw[j + l] * (C(load(p[j + l])) * rs);
      C c = 0;
      for (; j < D; ++j) c += C(load(d[j])) * pw[j] * (C(load(p[j])) * rs);
      for (int64_t l = 0; l < kLanes; ++l) c += lane[l];
#pragma omp simd
      for (int64_t k = 0; k < D; ++k) acc_w[k] += C(load(d[k])) * (C(load(p[k])) * rs);
      c /= C(D);
      if (pr) {
        const TX* res = pr + i * D;
#pragma omp simd
        for (int64_t j = 0; j < D; ++j) {
          C dxh = C(load(d[j])) * pw[j];
          o[j] =
              store<TX>(C(load(store<TX>(rs * (dxh - C(load(p[j])) * rs * c)))) + C(load(res[j])));
        }
        continue;
      }
#pragma omp simd
      for (int64_t j = 0; j < D; ++j) {
        C dxh = C(load(d[j])) * pw[j];
        o[j] = store<TX>(rs * (dxh - C(load(p[j])) * rs * c));
      }
    }
  });
  part.reduce_into(chunks, 0, dw.data<C>());
  if (in[2].defined() && in[2].dtype() != dw.dtype()) dw = dw.to(in[2].dtype());
  return {dx, dw};
}

// f(TX{}, TO{}) for the input and output dtypes rms_norm supports: float32, float64, and
// 16-bit inputs giving their own dtype or float32 (with a float32 weight).
template <typename F>
decltype(auto) visit_rms_types(DType x, DType out, F&& f) {
  if (x == DType::f32 && out == DType::f32) return f(float{}, float{});
  if (x == DType::f64 && out == DType::f64) return f(double{}, double{});
  if (x == DType::bf16 && out == DType::bf16) return f(BFloat16{}, BFloat16{});
  if (x == DType::bf16 && out == DType::f32) return f(BFloat16{}, float{});
  if (x == DType::f16 && out == DType::f16) return f(Half{}, Half{});
  if (x == DType::f16 && out == DType::f32) return f(Half{}, float{});
  ZENITH_FAIL("[rms_norm] unsupported input ", dtype_name(x), " with output ", dtype_name(out));
}

// The dtype of rms_norm's output: that of weight * x.
DType rms_out_dtype(const Tensor& x, const Tensor& w) {
  return w.defined() ? promote_types(x.dtype(), w.dtype()) : x.dtype();
}

std::vector<Tensor> layer_norm_kernel(const std::vector<Tensor>& in, const LayerNormAttrs& a) {
  return visit_float(in[0].dtype(), "layer_norm",
                     [&](auto tag) { return layer_norm_fwd<decltype(tag)>(in, a.D, a.eps); });
}
std::vector<Tensor> layer_norm_backward_kernel(const std::vector<Tensor>& in,
                                               const LayerNormAttrs& a) {
  return visit_float(in[1].dtype(), "layer_norm_backward",
                     [&](auto tag) { return layer_norm_bwd<decltype(tag)>(in, a.D); });
}
std::vector<Tensor> rms_norm_kernel(const std::vector<Tensor>& in, const LayerNormAttrs& a) {
  return visit_rms_types(in[0].dtype(), rms_out_dtype(in[0], in[1]), [&](auto tx, auto to) {
    return rms_norm_fwd<decltype(tx), decltype(to)>(in, a.D, a.eps);
  });
}
std::vector<Tensor> rms_norm_backward_kernel(const std::vector<Tensor>& in,
                                             const LayerNormAttrs& a) {
  return visit_rms_types(in[1].dtype(), rms_out_dtype(in[1], in[2]), [&](auto tx, auto to) {
    return rms_norm_bwd<decltype(tx), decltype(to)>(in, a.D);
  });
}

// The fused residual forms: x, the residual and the weight of one dtype, float32 or float64
// (graph mode's fuse_residual_norm pass fuses only those).
void check_residual_types(const std::vector<Tensor>& in, size_t x, size_t res, size_t w,
                          const char* op) {
  const DType t = in[x].dtype();
  ZENITH_CHECK(t == DType::f32 || t == DType::f64, "[", op,
               "] the CPU kernel takes float32 or float64, got ", dtype_name(t));
  ZENITH_CHECK(in[res].dtype() == t && (!in[w].defined() || in[w].dtype() == t), "[", op,
               "] the residual and the weight must be ", dtype_name(t));
  ZENITH_CHECK(in[res].shape() == in[x].shape(), "[", op, "] the residual has shape ",
               shape_str(in[res].shape()), ", expected ", shape_str(in[x].shape()));
}
std::vector<Tensor> add_rms_norm_kernel(const std::vector<Tensor>& in, const LayerNormAttrs& a) {
  ZENITH_CHECK(in.size() == 3, "[add_rms_norm] expected 3 inputs, got ", in.size());
  check_residual_types(in, 0, 1, 2, "add_rms_norm");
  return visit_float(in[0].dtype(), "add_rms_norm", [&](auto t) {
    return rms_norm_fwd<decltype(t), decltype(t)>(in, a.D, a.eps, /*residual=*/true);
  });
}
std::vector<Tensor> rms_norm_add_backward_kernel(const std::vector<Tensor>& in,
                                                 const LayerNormAttrs& a) {
  ZENITH_CHECK(in.size() == 5, "[rms_norm_add_backward] expected 5 inputs, got ", in.size());
  check_residual_types(in, 1, 4, 2, "rms_norm_add_backward");
  ZENITH_CHECK(in[0].dtype() == in[1].dtype(), "[rms_norm_add_backward] dy is ",
               dtype_name(in[0].dtype()), ", expected ", dtype_name(in[1].dtype()));
  return visit_float(in[1].dtype(), "rms_norm_add_backward",
                     [&](auto t) { return rms_norm_bwd<decltype(t), decltype(t)>(in, a.D); });
}

ZENITH_REGISTER_KERNEL(layer_norm, CPU, layer_norm_kernel);
ZENITH_REGISTER_KERNEL(layer_norm_backward, CPU, layer_norm_backward_kernel);
ZENITH_REGISTER_KERNEL(rms_norm, CPU, rms_norm_kernel);
ZENITH_REGISTER_KERNEL(rms_norm_backward, CPU, rms_norm_backward_kernel);
ZENITH_REGISTER_KERNEL(add_rms_norm, CPU, add_rms_norm_kernel);
ZENITH_REGISTER_KERNEL(rms_norm_add_backward, CPU, rms_norm_add_backward_kernel);

}  // namespace
}  // namespace zenith::cpu
