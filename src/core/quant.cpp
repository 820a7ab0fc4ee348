// GGML's q8_0, q4_0 and q4_K blocks and QLoRA's nf4 (include/zenith/quant.h): scalar reference
// quantization and dequantization. The kernels of src/backend/cpu/quant_*.cpp read the same bytes.
#include "zenith/quant.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/quant_x8.h"
#include "zenith/dtype.h"
#include "zenith/error.h"

namespace zenith {
namespace {

constexpr int64_t kQ8Bytes = 34, kQ4Bytes = 18, kQ4kBytes = 144;

void put_half(uint8_t* p, float v) {
  const uint16_t h = float_to_half(v);
  std::memcpy(p, &h, 2);
}
float get_half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return half_to_float(h);
}

// q8_0: d = max |x| / 127, q = round(x / d).
void quantize_q8_0(const float* x, uint8_t* out) {
  float amax = 0;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
  put_half(out, d);
  for (int i = 0; i < 32; ++i) out[2 + i] = uint8_t(int8_t(std::lround(x[i] * id)));
}

// q4_0: d = -x_max / 8 for the x of largest magnitude (so it maps to q = 0), q = x / d + 8.
void quantize_q4_0(const float* x, uint8_t* out) {
  float amax = 0, max = 0;
  for (int i = 0; i < 32; ++i)
    if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), max = x[i];
  const float d = max / -8.0f, id = d != 0 ? 1.0f / d : 0.0f;
  put_half(out, d);
  auto q = [&](float v) { return std::min(15, int(std::floor(v * id + 8.5f))); };
  for (int j = 0; j < 16; ++j) out[2 + j] = uint8_t(q(x[j]) | (q(x[j + 16]) << 4));
}

// The scale s > 0 and offset m >= 0 with x ~ s q - m, q in 0..15, for one sub-block of 32: a
// few candidate scales around (max - min) / 15, each refitted by least squares on its levels.
void fit_sub_block(const float* x, float& scale, float& min_out) {
  float lo = 0, hi = 0;  // lo <= 0 keeps the offset non-negative, as q4_K stores it
  for (int i = 0; i < 32; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
  if (hi <= lo) {
    scale = 0, min_out = -lo;
    return;
  }
  float best_err = INFINITY;
  scale = (hi - lo) / 15, min_out = -lo;
  for (int step = -4; step <= 8; ++step) {
    const float iscale = (15.0f + 0.25f * step) / (hi - lo);
    double sl = 0, sll = 0, sx = 0, slx = 0;
    int levels[32];
    for (int i = 0; i < 32; ++i) {
      levels[i] = std::clamp(int(std::lround((x[i] - lo) * iscale)), 0, 15);
      sl += levels[i], sll += double(levels[i]) * levels[i], sx += x[i];
      slx += double(levels[i]) * x[i];
    }
    const double det = 32 * sll - sl * sl;
    if (det <= 0) continue;
    double s = (32 * slx - sl * sx) / det, b = (sll * sx - sl * slx) / det;  // x ~ s q + b
    if (b > 0) b = 0, s = sll > 0 ? slx / sll : 0;
    if (s <= 0) continue;
    double err = 0;
    for (int i = 0; i < 32; ++i) err += std::pow(s * levels[i] + b - x[i], 2);
    if (err < best_err) best_err = float(err), scale = float(s), min_out = float(-b);
  }
}

// q4_K: 8 sub-blocks' scales and offsets quantized to 6 bits against the f16 d and dmin.
void quantize_q4_k(const float* x, uint8_t* out) {
  float scales[8], mins[8], max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    fit_sub_block(x + 32 * j, scales[j], mins[j]);
    max_scale = std::max(max_scale, scales[j]), max_min = std::max(max_min, mins[j]);
  }
  put_half(out, max_scale / 63), put_half(out + 2, max_min / 63);
  const float d = get_half(out), dmin = get_half(out + 2);
  uint8_t sc[8], mn[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = uint8_t(d > 0 ? std::clamp(int(std::lround(scales[j] / d)), 0, 63) : 0);
    mn[j] = uint8_t(dmin > 0 ? std::clamp(int(std::lround(mins[j] / dmin)), 0, 63) : 0);
  }
  uint8_t* packed = out + 4;  // sub-blocks 0-3 in the low 6 bits, 4-7 split over the rest
  std::memset(packed, 0, 12);
  for (int j = 0; j < 4; ++j) packed[j] = sc[j], packed[j + 4] = mn[j];
  for (int j = 4; j < 8; ++j) {
    packed[j + 4] = uint8_t((sc[j] & 0xF) | ((mn[j] & 0xF) << 4));
    packed[j - 4] |= uint8_t((sc[j] >> 4) << 6);
    packed[j] |= uint8_t((mn[j] >> 4) << 6);
  }
  uint8_t q[256];
  for (int j = 0; j < 8; ++j) {
    const float s = d * sc[j], m = dmin * mn[j];
    for (int i = 0; i < 32; ++i) {
      const float v = s > 0 ? (x[32 * j + i] + m) / s : 0;
      q[32 * j + i] = uint8_t(std::clamp(int(std::lround(v)), 0, 15));
    }
  }
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l)
      out[16 + 32 * c + l] = uint8_t(q[64 * c + l] | (q[64 * c + 32 + l] << 4));
}

void dequantize_q4_k(const uint8_t* in, float* y) {
  const float d = get_half(in), dmin = get_half(in + 2);
  const uint8_t* packed = in + 4;
  const uint8_t* qs = in + 16;
  for (int j = 0; j < 8; ++j) {
    int sc, mn;
    if (j < 4) {
      sc = packed[j] & 63, mn = packed[j + 4] & 63;
    } else {
      sc = (packed[j + 4] & 0xF) | ((packed[j - 4] >> 6) << 4);
      mn = (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4);
    }
    const float s = d * sc, m = dmin * mn;
    const int c = j / 2, shift = (j % 2) * 4;
    for (int l = 0; l < 32; ++l) y[32 * j + l] = s * ((qs[32 * c + l] >> shift) & 0xF) - m;
  }
}

// nf4 (quant.h): a row's tail after the codes and nibbles.
int64_t nf4_groups(int64_t blocks) { return (blocks + 255) / 256; }

// Index of the value of the ascending table nearest to v (the lower one on a tie). The choices
// are made in double, so the test's float64 reference of the scheme picks the same ones.
int nearest(const float* table, int size, double v) {
  const int hi = int(
      std::lower_bound(table, table + size, v, [](float t, double x) { return double(t) < x; }) -
      table);
  if (hi == 0) return 0;
  if (hi == size) return size - 1;
  return v - double(table[hi - 1]) <= double(table[hi]) - v ? hi - 1 : hi;
}

// bitsandbytes' order: each element to the nearest level of x / absmax with the block's exact
// absmax, then the absmax double-quantized around their mean in groups of 256 blocks.
void quantize_nf4(const float* x, int64_t n, uint8_t* out) {
  const int64_t nb = n / 64, groups = nf4_groups(nb);
  std::vector<float> absmax(size_t(nb), 0.0f);
  double sum = 0;
  uint8_t* codes = out;
  uint8_t* nibbles = out + nb;
  uint8_t* tail = nibbles + 32 * nb;  // f32s at any alignment: copied with memcpy
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + 64 * b;
    for (int i = 0; i < 64; ++i) absmax[b] = std::max(absmax[b], std::fabs(xb[i]));
    sum += absmax[b];
    const double a = absmax[b];
    auto level = [&](float v) { return a > 0 ? nearest(kNf4Levels, 16, double(v) / a) : 7; };
    for (int j = 0; j < 32; ++j)
      nibbles[32 * b + j] = uint8_t(level(xb[2 * j]) << 4 | level(xb[2 * j + 1]));
  }
  const float offset = nb ? float(sum / double(nb)) : 0.0f;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t b0 = 256 * g, b1 = std::min(nb, b0 + 256);
    float scale = 0;
    for (int64_t b = b0; b < b1; ++b) scale = std::max(scale, std::fabs(absmax[b] - offset));
    std::memcpy(tail + 4 * g, &scale, 4);
    for (int64_t b = b0; b < b1; ++b) {
      const double t = scale > 0 ? double(absmax[b] - offset) / double(scale) : 0.0;
      codes[b] = uint8_t(nearest(kDynamicMap, 256, t));
    }
  }
  std::memcpy(tail + 4 * groups, &offset, 4);
}

void dequantize_nf4(const uint8_t* in, int64_t n, float* y) {
  const int64_t nb = n / 64, groups = nf4_groups(nb);
  const uint8_t* codes = in;
  const uint8_t* nibbles = in + nb;
  const uint8_t* tail = nibbles + 32 * nb;
  float offset;
  std::memcpy(&offset, tail + 4 * groups, 4);
  for (int64_t g = 0; g < groups; ++g) {
    float scale;
    std::memcpy(&scale, tail + 4 * g, 4);
    for (int64_t b = 256 * g; b < std::min(nb, 256 * g + 256); ++b) {
      const float absmax = kDynamicMap[codes[b]] * scale + offset;
      for (int j = 0; j < 32; ++j) {
        const uint8_t v = nibbles[32 * b + j];
        y[64 * b + 2 * j] = kNf4Levels[v >> 4] * absmax;
        y[64 * b + 2 * j + 1] = kNf4Levels[v & 15] * absmax;
      }
    }
  }
}

// nf4_f32 (quant.h): the same nibbles as nf4, each block's exact absmax as an f32 before them.
void quantize_nf4_f32(const float* x, int64_t n, uint8_t* out) {
  const int64_t nb = n / 64;
  uint8_t* nibbles = out + 4 * nb;
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + 64 * b;
    float absmax = 0;
    for (int i = 0; i < 64; ++i) absmax = std::max(absmax, std::fabs(xb[i]));
    std::memcpy(out + 4 * b, &absmax, 4);
    const double a = absmax;
    auto level = [&](float v) { return a > 0 ? nearest(kNf4Levels, 16, double(v) / a) : 7; };
    for (int j = 0; j < 32; ++j)
      nibbles[32 * b + j] = uint8_t(level(xb[2 * j]) << 4 | level(xb[2 * j + 1]));
  }
}

void dequantize_nf4_f32(const uint8_t* in, int64_t n, float* y) {
  const int64_t nb = n / 64;
  const uint8_t* nibbles = in + 4 * nb;
  for (int64_t b = 0; b < nb; ++b) {
    float absmax;
    std::memcpy(&absmax, in + 4 * b, 4);
    for (int j = 0; j < 32; ++j) {
      const uint8_t v = nibbles[32 * b + j];
      y[64 * b + 2 * j] = kNf4Levels[v >> 4] * absmax;
      y[64 * b + 2 * j + 1] = kNf4Levels[v & 15] * absmax;
    }
  }
}

}  // namespace

const float kNf4Levels[16] = {-1.0f,
                              -0.6961928009986877f,
                              -0.5250730514526367f,
                              -0.39491748809814453f,
                              -0.28444138169288635f,
                              -0.18477343022823334f,
                              -0.09105003625154495f,
                              0.0f,
                              0.07958029955625534f,
                              0.16093020141124725f,
                              0.24611230194568634f,
                              0.33791524171829224f,
                              0.44070982933044434f,
                              0.5626170039176941f,
                              0.7229568362236023f,
                              1.0f};

// bitsandbytes' create_dynamic_map(signed=True): for e = 0..6, the midpoints of torch.linspace(0.1,
// 1, 2^e + 1) (float32) times 10^(e - 6), both signs, plus 0 and 1; its float32 values as
// torch computes them (scripts/make_nf4_fixture.py writes the same table from that definition).
const float kDynamicMap[256] = {
    -0.99296874f,    -0.9789062f,     -0.96484375f,    -0.9507812f,
    -0.9367187f,     -0.92265624f,    -0.9085938f,     -0.89453125f,
    -0.8804687f,     -0.8664062f,     -0.85234374f,    -0.8382812f,
    -0.82421875f,    -0.8101562f,     -0.7960937f,     -0.78203124f,
    -0.7679688f,     -0.75390625f,    -0.7398438f,     -0.72578126f,
    -0.7117188f,     -0.6976563f,     -0.68359375f,    -0.6695313f,
    -0.65546876f,    -0.64140624f,    -0.6273438f,     -0.61328125f,
    -0.5992187f,     -0.58515626f,    -0.5710938f,     -0.5570313f,
    -0.54296875f,    -0.5289062f,     -0.51484376f,    -0.50078124f,
    -0.48671877f,    -0.47265625f,    -0.45859373f,    -0.44453126f,
    -0.43046874f,    -0.4164062f,     -0.40234375f,    -0.38828123f,
    -0.37421876f,    -0.36015624f,    -0.3460937f,     -0.33203125f,
    -0.31796873f,    -0.30390626f,    -0.28984374f,    -0.27578127f,
    -0.26171875f,    -0.24765626f,    -0.23359376f,    -0.21953125f,
    -0.20546874f,    -0.19140625f,    -0.17734374f,    -0.16328125f,
    -0.14921875f,    -0.13515624f,    -0.12109375f,    -0.107031256f,
    -0.09859375f,    -0.095781244f,   -0.092968754f,   -0.09015625f,
    -0.08734375f,    -0.08453125f,    -0.08171874f,    -0.07890625f,
    -0.07609375f,    -0.07328125f,    -0.070468746f,   -0.067656256f,
    -0.06484375f,    -0.062031247f,   -0.059218753f,   -0.05640625f,
    -0.05359375f,    -0.05078125f,    -0.04796875f,    -0.04515625f,
    -0.042343747f,   -0.03953125f,    -0.036718752f,   -0.033906247f,
    -0.03109375f,    -0.028281247f,   -0.02546875f,    -0.02265625f,
    -0.01984375f,    -0.01703125f,    -0.01421875f,    -0.01140625f,
    -0.00971875f,    -0.009156249f,   -0.00859375f,    -0.00803125f,
    -0.00746875f,    -0.00690625f,    -0.00634375f,    -0.00578125f,
    -0.0052187503f,  -0.0046562497f,  -0.00409375f,    -0.0035312497f,
    -0.00296875f,    -0.00240625f,    -0.00184375f,    -0.0012812499f,
    -9.437501e-04f,  -8.3125e-04f,    -7.1875006e-04f, -6.062501e-04f,
    -4.9375003e-04f, -3.8125002e-04f, -2.6875004e-04f, -1.5625001e-04f,
    -8.875e-05f,     -6.625e-05f,     -4.375e-05f,     -2.1249998e-05f,
    -7.75e-06f,      -3.2500002e-06f, -5.5000004e-07f, 0.0f,
    5.5000004e-07f,  3.2500002e-06f,  7.75e-06f,       2.1249998e-05f,
    4.375e-05f,      6.625e-05f,      8.875e-05f,      1.5625001e-04f,
    2.6875004e-04f,  3.8125002e-04f,  4.9375003e-04f,  6.062501e-04f,
    7.1875006e-04f,  8.3125e-04f,     9.437501e-04f,   0.0012812499f,
    0.00184375f,     0.00240625f,     0.00296875f,     0.0035312497f,
    0.00409375f,     0.0046562497f,   0.0052187503f,   0.00578125f,
    0.00634375f,     0.00690625f,     0.00746875f,     0.00803125f,
    0.00859375f,     0.009156249f,    0.00971875f,     0.01140625f,
    0.01421875f,     0.01703125f,     0.01984375f,     0.02265625f,
    0.02546875f,     0.028281247f,    0.03109375f,     0.033906247f,
    0.036718752f,    0.03953125f,     0.042343747f,    0.04515625f,
    0.04796875f,     0.05078125f,     0.05359375f,     0.05640625f,
    0.059218753f,    0.062031247f,    0.06484375f,     0.067656256f,
    0.070468746f,    0.07328125f,     0.07609375f,     0.07890625f,
    0.08171874f,     0.08453125f,     0.08734375f,     0.09015625f,
    0.092968754f,    0.095781244f,    0.09859375f,     0.107031256f,
    0.12109375f,     0.13515624f,     0.14921875f,     0.16328125f,
    0.17734374f,     0.19140625f,     0.20546874f,     0.21953125f,
    0.23359376f,     0.24765626f,     0.26171875f,     0.27578127f,
    0.28984374f,     0.30390626f,     0.31796873f,     0.33203125f,
    0.3460937f,      0.36015624f,     0.37421876f,     0.38828123f,
    0.40234375f,     0.4164062f,      0.43046874f,     0.44453126f,
    0.45859373f,     0.47265625f,     0.48671877f,     0.50078124f,
    0.51484376f,     0.5289062f,      0.54296875f,     0.5570313f,
    0.5710938f,      0.58515626f,     0.5992187f,      0.61328125f,
    0.6273438f,      0.64140624f,     0.65546876f,     0.6695313f,
    0.68359375f,     0.6976563f,      0.7117188f,      0.72578126f,
    0.7398438f,      0.75390625f,     0.7679688f,      0.78203124f,
    0.7960937f,      0.8101562f,      0.82421875f,     0.8382812f,
    0.85234374f,     0.8664062f,      0.8804687f,      0.89453125f,
    0.9085938f,      0.92265624f,     0.9367187f,      0.9507812f,
    0.96484375f,     0.9789062f,      0.99296874f,     1.0f,
};

int64_t quant_block_elems(QuantFormat f) {
  return f == QuantFormat::q4_k ? 256 : is_nf4(f) ? 64 : 32;
}

int64_t quant_block_bytes(QuantFormat f) {
  switch (f) {
    case QuantFormat::q8_0:
      return kQ8Bytes;
    case QuantFormat::q4_0:
      return kQ4Bytes;
    case QuantFormat::q4_k:
      return kQ4kBytes;
    case QuantFormat::nf4:
      return 33;
    case QuantFormat::nf4_f32:
      return 36;
  }
  return 0;
}

const char* quant_name(QuantFormat f) {
  switch (f) {
    case QuantFormat::q8_0:
      return "q8_0";
    case QuantFormat::q4_0:
      return "q4_0";
    case QuantFormat::q4_k:
      return "q4_k";
    case QuantFormat::nf4:
      return "nf4";
    case QuantFormat::nf4_f32:
      return "nf4_f32";
  }
  return "?";
}

QuantFormat quant_from_name(const std::string& name) {
  std::string lower = name;
  for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
  for (QuantFormat f : {QuantFormat::q8_0, QuantFormat::q4_0, QuantFormat::q4_k, QuantFormat::nf4,
                        QuantFormat::nf4_f32})
    if (lower == quant_name(f)) return f;
  ZENITH_FAIL("[quant] unknown quantized format '", name,
              "' (expected q8_0, q4_0, q4_k, nf4 or nf4_f32)");
}

int64_t quant_row_bytes(QuantFormat f, int64_t n) {
  ZENITH_CHECK(n % quant_block_elems(f) == 0, "[quant] a ", quant_name(f), " row of ", n,
               " elements is not a whole number of ", quant_block_elems(f), "-element blocks");
  const int64_t blocks = n / quant_block_elems(f);
  if (f == QuantFormat::nf4) return blocks * 33 + 4 * nf4_groups(blocks) + 4;
  return blocks * quant_block_bytes(f);
}

void quantize_row(QuantFormat f, const float* x, int64_t n, uint8_t* out) {
  if (is_nf4(f)) {
    quant_row_bytes(f, n);  // checks n
    f == QuantFormat::nf4 ? quantize_nf4(x, n, out) : quantize_nf4_f32(x, n, out);
    return;
  }
  const int64_t blocks = quant_row_bytes(f, n) / quant_block_bytes(f);
  const int64_t elems = quant_block_elems(f), bytes = quant_block_bytes(f);
  for (int64_t b = 0; b < blocks; ++b) {
    const float* xb = x + b * elems;
    uint8_t* ob = out + b * bytes;
    if (f == QuantFormat::q8_0)
      quantize_q8_0(xb, ob);
    else if (f == QuantFormat::q4_0)
      quantize_q4_0(xb, ob);
    else
      quantize_q4_k(xb, ob);
  }
}

void dequantize_row(QuantFormat f, const uint8_t* in, int64_t n, float* out) {
  if (is_nf4(f)) {
    quant_row_bytes(f, n);  // checks n
    f == QuantFormat::nf4 ? dequantize_nf4(in, n, out) : dequantize_nf4_f32(in, n, out);
    return;
  }
  const int64_t blocks = quant_row_bytes(f, n) / quant_block_bytes(f);
  const int64_t elems = quant_block_elems(f), bytes = quant_block_bytes(f);
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* ib = in + b * bytes;
    float* y = out + b * elems;
    if (f == QuantFormat::q4_k) {
      dequantize_q4_k(ib, y);
      continue;
    }
    const float d = get_half(ib);
    if (f == QuantFormat::q8_0) {
      for (int i = 0; i < 32; ++i) y[i] = d * float(int8_t(ib[2 + i]));
    } else {
      for (int j = 0; j < 16; ++j) {
        y[j] = d * float((ib[2 + j] & 0xF) - 8);
        y[j + 16] = d * float((ib[2 + j] >> 4) - 8);
      }
    }
  }
}

QuantizedWeight quantize_weight(const Tensor& weight, QuantFormat f) {
  ZENITH_CHECK(weight.dim() == 2, "[quantize] expected a weight [out, in], got ",
               shape_str(weight.shape()));
  const int64_t out = weight.size(0), in = weight.size(1);
  const int64_t row_bytes = quant_row_bytes(f, in);
  Tensor w = weight.to(DType::f32).contiguous();
  Tensor blocks = Tensor::empty({out, row_bytes}, DType::u8);
  const float* src = w.data<float>();
  uint8_t* dst = blocks.data<uint8_t>();
  for (int64_t r = 0; r < out; ++r) quantize_row(f, src + r * in, in, dst + r * row_bytes);
  return {blocks, f, out, in};
}

Tensor dequantize_weight(const QuantizedWeight& w) {
  check_quantized_weight(w, "dequantize");
  Tensor out = Tensor::empty({w.out_features, w.in_features}, DType::f32);
  const int64_t row_bytes = quant_row_bytes(w.format, w.in_features);
  Tensor blocks = quant_to_ggml(w).blocks.contiguous();  // unpacked if in the x8 layout
  for (int64_t r = 0; r < w.out_features; ++r)
    dequantize_row(w.format, blocks.data<uint8_t>() + r * row_bytes, w.in_features,
                   out.data<float>() + r * w.in_features);
  return out;
}

void check_quantized_weight(const QuantizedWeight& w, const std::string& what) {
  ZENITH_CHECK(w.blocks.defined() && w.blocks.dtype() == DType::u8, "[", what,
               "] quantized blocks must be a uint8 tensor");
  const int64_t row_bytes = quant_row_bytes(w.format, w.in_features);
  if (quant_is_x8(w)) {  // the inference layout, a row group per row (core/quant_x8.h)
    ZENITH_CHECK(w.blocks.size(1) == 8 * row_bytes, "[", what, "] interleaved ",
                 quant_name(w.format), " blocks of a [", w.out_features, ", ", w.in_features,
                 "] weight must be [", w.out_features / 8, ", ", 8 * row_bytes, "], got ",
                 shape_str(w.blocks.shape()));
    return;
  }
  ZENITH_CHECK(
      w.blocks.dim() == 2 && w.blocks.size(0) == w.out_features && w.blocks.size(1) == row_bytes,
      "[", what, "] ", quant_name(w.format), " blocks of a [", w.out_features, ", ", w.in_features,
      "] weight must be [", w.out_features, ", ", row_bytes, "], got ",
      shape_str(w.blocks.shape()));
}

}  // namespace zenith
