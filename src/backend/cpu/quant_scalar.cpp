// The scalar reference of the quantized linear kernels (quant_kernels.h): the same integer
// arithmetic as the SIMD paths, one element at a time, and the activations' quantization.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/quant_kernels.h"
#include "zenith/dtype.h"

namespace zenith::cpu {
namespace {

float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return half_to_float(h);
}

int dot32(const uint8_t* w, const int8_t* a, bool signed_w) {
  int s = 0;
  for (int i = 0; i < 32; ++i) s += (signed_w ? int(int8_t(w[i])) : int(w[i])) * a[i];
  return s;
}

// One weight row against one activation row.
float row_dot(QuantFormat f, const uint8_t* w, const ActBlock* a, int64_t blocks32) {
  float sum = 0;
  if (f == QuantFormat::q8_0) {
    for (int64_t b = 0; b < blocks32; ++b, w += 34)
      sum += half_at(w) * a[b].d * float(dot32(w + 2, a[b].q, true));
  } else if (f == QuantFormat::q4_0) {
    uint8_t nib[32];
    for (int64_t b = 0; b < blocks32; ++b, w += 18) {
      for (int j = 0; j < 16; ++j) nib[j] = w[2 + j] & 0xF, nib[j + 16] = w[2 + j] >> 4;
      int offset = 0;
      for (int l = 0; l < 8; ++l) offset += a[b].off[l];
      sum += half_at(w) * a[b].d * float(dot32(nib, a[b].q, false) + offset);
    }
  } else {
    uint8_t nib[32];
    for (int64_t b = 0; b < blocks32; b += 8, w += 144) {
      const float d = half_at(w), dmin = half_at(w + 2);
      for (int j = 0; j < 8; ++j) {
        int sc, mn;
        q4k_scale_min(w + 4, j, sc, mn);
        const uint8_t* qs = w + 16 + 32 * (j / 2);
        for (int l = 0; l < 32; ++l) nib[l] = (qs[l] >> (4 * (j % 2))) & 0xF;
        const ActBlock& ab = a[b + j];
        sum += d * sc * ab.d * float(dot32(nib, ab.q, false)) - dmin * mn * ab.dsum;
      }
    }
  }
  return sum;
}

}  // namespace

void quantize_activations(const float* x, int64_t n, ActBlock* out) {
  for (int64_t b = 0; b < n / 32; ++b, x += 32) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float d = amax / 127, id = d > 0 ? 1 / d : 0;
    int sum = 0;
    for (int i = 0; i < 32; ++i) {
      out[b].q[i] = int8_t(std::nearbyint(x[i] * id));
      sum += out[b].q[i];
    }
    for (int l = 0; l < 8; ++l)
      out[b].off[l] =
          -8 * (out[b].q[4 * l] + out[b].q[4 * l + 1] + out[b].q[4 * l + 2] + out[b].q[4 * l + 3]);
    out[b].off_sum = -8 * sum;
    out[b].d = d, out[b].dsum = d * float(sum);
  }
}

void quant_rows_scalar(const QuantRows& p, int64_t o0, int64_t o1) {
  for (int64_t r = 0; r < p.m; ++r)
    for (int64_t o = o0; o < o1; ++o)
      p.y[r * p.out + o] =
          row_dot(p.format, p.w + o * p.row_bytes, p.a + r * p.blocks32, p.blocks32);
}

}  // namespace zenith::cpu
