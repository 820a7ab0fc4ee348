// The quantized linear layer's CPU kernel (quant_kernels.h): picks the instruction set once,
// quantizes the activations, and splits the weight's rows over the claiming pool.
#include <immintrin.h>

#include <vector>

#include "backend/cpu/claim_pool.h"
#include "backend/cpu/quant_kernels.h"
#include "backend/cpu/quant_repack.h"
#include "core/dispatch.h"
#include "core/grad_mode.h"
#include "core/quant_x8.h"

namespace zenith::cpu {
namespace {

// Work below this many weight bytes runs on the calling thread (a pool wake-up costs more).
constexpr int64_t kParallelBytes = 64 << 10;
// A claimed item is about this many weight bytes at one activation row: one thread streams it
// as one run (an item of 16 KiB ended each stream before the prefetcher had ramped up: two
// threads decoded the 110M shape's q8_0 and q4_0 weights slower than one), and a late helper
// still finds items. With more rows an item is more arithmetic, so it holds fewer bytes.
constexpr int64_t kItemBytes = 128 << 10;
constexpr int64_t kMinItemBytes = 16 << 10;

// Units (rows, or 8-row groups) per item: items of about item bytes, in equal parts.
int64_t units_per_item(int64_t m, int64_t units, int64_t unit_bytes, int64_t multiple) {
  const int64_t item = std::max(kMinItemBytes, kItemBytes / std::max<int64_t>(m, 1));
  const int64_t items = std::max<int64_t>(1, (units * unit_bytes + item - 1) / item);
  const int64_t per = (units + items - 1) / items;
  return std::max(multiple, (per + multiple - 1) / multiple * multiple);
}

// float64 x: the exact product with the dequantized weight (the reference the op test uses).
Tensor linear_f64(const Tensor& x, const QuantizedWeight& w) {
  Tensor weight = dequantize_weight(w);
  const int64_t m = x.numel() / w.in_features, in = w.in_features, out = w.out_features;
  Shape shape = x.shape();
  shape.back() = out;
  Tensor y = Tensor::empty(shape, DType::f64);
  const double* xp = x.data<double>();
  const float* wp = weight.data<float>();
  double* yp = y.data<double>();
  for (int64_t r = 0; r < m; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double s = 0;
      for (int64_t i = 0; i < in; ++i) s += xp[r * in + i] * double(wp[o * in + i]);
      yp[r * out + o] = s;
    }
  return y;
}

std::vector<Tensor> quantized_linear_kernel(const std::vector<Tensor>& in,
                                            const QuantizedLinearAttrs& attrs) {
  const QuantizedWeight w{in[1], QuantFormat(attrs.format), attrs.out_features, attrs.in_features};
  const Tensor& x = in[0];
  if (x.dtype() == DType::f64) return {linear_f64(x, w)};
  Shape shape = x.shape();
  shape.back() = w.out_features;
  Tensor y = Tensor::empty(shape, DType::f32);
  const QuantIsa isa = quant_isa();
  if (in[1].size(0) != w.out_features) {  // blocks in the interleaved layout (core/quant_x8.h)
    if (x8_applies(isa, w.format, w.out_features)) {
      quant_linear(isa, w.format, x.data<float>(), x.numel() / w.in_features, w.in_features,
                   nullptr, w.out_features, y.data<float>(), in[1].data<uint8_t>());
      return {y};
    }
    // An ISA without the repacked kernel (not chosen by pack_for_inference): GGML's rows again.
    const Tensor rows = quant_to_ggml(w).blocks;
    quant_linear(isa, w.format, x.data<float>(), x.numel() / w.in_features, w.in_features,
                 rows.data<uint8_t>(), w.out_features, y.data<float>());
    return {y};
  }
  // The repacked copy costs the weight's bytes a second time: inference (grad mode off, as in
  // generate, the engine and perplexity) takes it for speed; training does not, and drops a copy
  // an evaluation made (QLoRA keeps its frozen base small). Activation checkpointing's first
  // forward runs without gradients but is training's: no copy there either. In one mode every call
  // on a weight takes the same path, whatever its rows: a row's result does not depend on its
  // batch.
  std::shared_ptr<const std::vector<uint8_t>> packed;
  if (x8_applies(isa, w.format, w.out_features)) {
    if (core::grad_mode_enabled() || core::recomputed_forward())
      x8_drop(w.blocks);
    else
      packed = x8_copy(w.blocks, w.format, w.out_features, w.in_features);
  }
  quant_linear(isa, w.format, x.data<float>(), x.numel() / w.in_features, w.in_features,
               w.blocks.data<uint8_t>(), w.out_features, y.data<float>(),
               packed ? packed->data() : nullptr);
  return {y};
}

ZENITH_REGISTER_KERNEL(quantized_linear, CPU, quantized_linear_kernel);

// nf4 (QLoRA's NormalFloat, quant.h) has no integer dot product: each weight row is decoded to
// float32 once and multiplied into every activation row with FMA.
__attribute__((target("avx512f"))) float dot_avx512(const float* a, const float* b, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16)
    acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc);
  return _mm512_reduce_add_ps(acc);
}

__attribute__((target("avx2,fma"))) float dot_avx2(const float* a, const float* b, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 8)
    acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc);
  float s = 0;
  for (float v : lanes) s += v;
  return s;
}

float dot_scalar(const float* a, const float* b, int64_t n) {
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

void nf4_rows(QuantIsa isa, QuantFormat f, const float* x, int64_t m, int64_t in, const uint8_t* w,
              int64_t row_bytes, int64_t out, float* y, int64_t o0, int64_t o1) {
  std::vector<float> row(size_t(in), 0.0f);
  for (int64_t o = o0; o < o1; ++o) {
    dequantize_row(f, w + o * row_bytes, in, row.data());
    for (int64_t r = 0; r < m; ++r)
      y[r * out + o] = isa == QuantIsa::avx512_vnni ? dot_avx512(x + r * in, row.data(), in)
                       : isa == QuantIsa::avx2      ? dot_avx2(x + r * in, row.data(), in)
                                                    : dot_scalar(x + r * in, row.data(), in);
  }
}

}  // namespace

bool quant_isa_supported(QuantIsa isa) {
  switch (isa) {
    case QuantIsa::scalar:
      return true;
    case QuantIsa::avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case QuantIsa::avx512_vnni:
      return __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vnni");
  }
  return false;
}

QuantIsa quant_isa() {
  static const QuantIsa best = quant_isa_supported(QuantIsa::avx512_vnni) ? QuantIsa::avx512_vnni
                               : quant_isa_supported(QuantIsa::avx2)      ? QuantIsa::avx2
                                                                          : QuantIsa::scalar;
  return best;
}

const char* quant_isa_name(QuantIsa isa) {
  switch (isa) {
    case QuantIsa::scalar:
      return "scalar";
    case QuantIsa::avx2:
      return "avx2";
    case QuantIsa::avx512_vnni:
      return "avx512_vnni";
  }
  return "?";
}

void quant_linear(QuantIsa isa, QuantFormat f, const float* x, int64_t m, int64_t in,
                  const uint8_t* w, int64_t out, float* y, const uint8_t* x8) {
  if (m == 0 || out == 0) return;
  if (is_nf4(f)) {
    const int64_t row_bytes = quant_row_bytes(f, in);
    if (out * row_bytes < kParallelBytes)
      return nf4_rows(isa, f, x, m, in, w, row_bytes, out, y, 0, out);
    const int64_t chunk = units_per_item(m, out, row_bytes, 4);
    parallel_claim((out + chunk - 1) / chunk, [&](int64_t i) {
      nf4_rows(isa, f, x, m, in, w, row_bytes, out, y, i * chunk, std::min(out, (i + 1) * chunk));
    });
    return;
  }
  const int64_t blocks32 = in / 32, row_bytes = quant_row_bytes(f, in);
  std::vector<ActBlock> a(size_t(m * blocks32));
  for (int64_t r = 0; r < m; ++r) quantize_activations(x + r * in, in, a.data() + r * blocks32);
  const QuantRows p{f, w, row_bytes, blocks32, out, a.data(), m, y, x8};
  if (x8 && x8_applies(isa, f, out)) {
    auto groups = [&](int64_t g0, int64_t g1) {
      if (isa == QuantIsa::avx512_vnni)
        quant_groups_x8_avx512_vnni(p, g0, g1);
      else
        quant_groups_x8_avx2(p, g0, g1);
    };
    if (out * row_bytes < kParallelBytes) return groups(0, out / 8);
    const int64_t chunk = units_per_item(m, out / 8, 8 * row_bytes, 1);
    parallel_claim((out / 8 + chunk - 1) / chunk,
                   [&](int64_t i) { groups(i * chunk, std::min(out / 8, (i + 1) * chunk)); });
    return;
  }
  auto rows = [&](int64_t o0, int64_t o1) {
    if (isa == QuantIsa::avx512_vnni)
      quant_rows_avx512_vnni(p, o0, o1);
    else if (isa == QuantIsa::avx2)
      quant_rows_avx2(p, o0, o1);
    else
      quant_rows_scalar(p, o0, o1);
  };
  if (out * row_bytes < kParallelBytes) {
    rows(0, out);
    return;
  }
  const int64_t chunk = units_per_item(m, out, row_bytes, 4);
  parallel_claim((out + chunk - 1) / chunk,
                 [&](int64_t i) { rows(i * chunk, std::min(out, (i + 1) * chunk)); });
}

}  // namespace zenith::cpu
