// The inference layout of q4_0, q8_0 and q4_K weights (quant_x8.h): the byte map both ways.
#include "core/quant_x8.h"

#include <atomic>
#include <cstring>
#include <vector>

#include "zenith/error.h"

namespace zenith {
namespace {

std::atomic<bool (*)(QuantFormat, int64_t)> x8_probe{nullptr};

uint32_t load4(const uint8_t* q) {
  uint32_t v;
  std::memcpy(&v, q, 4);
  return v;
}

void store4(uint8_t* q, uint32_t v) { std::memcpy(q, &v, 4); }

constexpr uint32_t kLow = 0x0F0F0F0Fu;

// q4_K's 6-bit scale and min of sub-block j (0-7) in GGML's 12 bytes, and their 16 values back
// into them (each of the 96 bits holds one bit of one value, so both ways are exact).
void q4k_get(const uint8_t* p, int j, int& sc, int& mn) {
  if (j < 4) {
    sc = p[j] & 63, mn = p[j + 4] & 63;
  } else {
    sc = (p[j + 4] & 0xF) | ((p[j - 4] >> 6) << 4);
    mn = (p[j + 4] >> 4) | ((p[j] >> 6) << 4);
  }
}

void q4k_put(const int* sc, const int* mn, uint8_t* p) {
  for (int j = 0; j < 4; ++j) {
    p[j] = uint8_t(sc[j] | ((sc[j + 4] >> 4) << 6));
    p[j + 4] = uint8_t(mn[j] | ((mn[j + 4] >> 4) << 6));
    p[j + 8] = uint8_t((sc[j + 4] & 0xF) | ((mn[j + 4] & 0xF) << 4));
  }
}

// q4_K, a super-block of 256 of 8 rows in 1152 bytes: 8 f16 d, 8 f16 dmin, 64 bytes whose byte
// 8j + r holds sub-block j's scale (low nibble) and min (high) of row r, low 4 bits each; 32
// bytes whose byte k = (8j + r) % 32 holds their top 2 bits (scale's in bits 0-1, min's in bits
// 2-3), in its low nibble for j < 4 and its high one for j >= 4; then 8 sub-blocks of 128
// bytes, each 4 chunks as q4_0's (element 8c + t low, 8c + 4 + t high). GGML's byte 32 i + l
// holds element l of sub-block 2i low and of sub-block 2i + 1 high.
void set_nibble(uint8_t& b, bool high, int v) {
  b = high ? uint8_t((b & 0x0F) | (v << 4)) : uint8_t((b & 0xF0) | v);
}

void pack_q4k(const uint8_t* src, int r, uint8_t* dst) {
  std::memcpy(dst + 2 * r, src, 2);
  std::memcpy(dst + 16 + 2 * r, src + 2, 2);
  for (int j = 0; j < 8; ++j) {
    int sc, mn;
    q4k_get(src + 4, j, sc, mn);
    const int k = 8 * j + r;
    dst[32 + k] = uint8_t((sc & 0xF) | ((mn & 0xF) << 4));
    set_nibble(dst[96 + k % 32], j >= 4, (sc >> 4) | ((mn >> 4) << 2));
  }
  for (int i = 0; i < 4; ++i) {
    const uint8_t* qs = src + 16 + 32 * i;
    uint8_t *even = dst + 128 + 256 * i + 4 * r, *odd = even + 128;
    for (int c = 0; c < 4; ++c) {
      const uint32_t lo = load4(qs + 8 * c), hi = load4(qs + 8 * c + 4);
      store4(even + 32 * c, (lo & kLow) | ((hi & kLow) << 4));
      store4(odd + 32 * c, ((lo >> 4) & kLow) | (hi & ~kLow));
    }
  }
}

void unpack_q4k(const uint8_t* src, int r, uint8_t* dst) {
  std::memcpy(dst, src + 2 * r, 2);
  std::memcpy(dst + 2, src + 16 + 2 * r, 2);
  int sc[8], mn[8];
  for (int j = 0; j < 8; ++j) {
    const int k = 8 * j + r, lo = src[32 + k], hi = (src[96 + k % 32] >> (j >= 4 ? 4 : 0)) & 0xF;
    sc[j] = (lo & 0xF) | ((hi & 3) << 4), mn[j] = (lo >> 4) | ((hi >> 2) << 4);
  }
  q4k_put(sc, mn, dst + 4);
  for (int i = 0; i < 4; ++i) {
    uint8_t* qs = dst + 16 + 32 * i;
    const uint8_t *even = src + 128 + 256 * i + 4 * r, *odd = even + 128;
    for (int c = 0; c < 4; ++c) {
      const uint32_t e = load4(even + 32 * c), o = load4(odd + 32 * c);
      store4(qs + 8 * c, (e & kLow) | ((o & kLow) << 4));
      store4(qs + 8 * c + 4, ((e >> 4) & kLow) | (o & ~kLow));
    }
  }
}

// The layout's block of 8 rows (a group g, block b) and row r's GGML block: a scale, then chunks
// c of 32 bytes whose bytes 4r..4r+3 are row r's. q4_0: chunk c holds elements 8c + t low and
// 8c + 4 + t high; GGML's byte k holds element k low and k + 16 high.
void pack_block(QuantFormat f, const uint8_t* src, int r, uint8_t* dst) {
  if (f == QuantFormat::q4_k) return pack_q4k(src, r, dst);
  std::memcpy(dst + 2 * r, src, 2);
  const uint8_t* qs = src + 2;
  uint8_t* chunks = dst + 16 + 4 * r;
  if (f == QuantFormat::q8_0) {
    for (int c = 0; c < 8; ++c) store4(chunks + 32 * c, load4(qs + 4 * c) ^ 0x80808080u);
    return;
  }
  for (int c = 0; c < 2; ++c)
    store4(chunks + 32 * c, (load4(qs + 8 * c) & kLow) | ((load4(qs + 8 * c + 4) & kLow) << 4));
  for (int c = 2; c < 4; ++c)
    store4(chunks + 32 * c,
           ((load4(qs + 8 * c - 16) >> 4) & kLow) | (load4(qs + 8 * c - 12) & ~kLow));
}

void unpack_block(QuantFormat f, const uint8_t* src, int r, uint8_t* dst) {
  if (f == QuantFormat::q4_k) return unpack_q4k(src, r, dst);
  std::memcpy(dst, src + 2 * r, 2);
  uint8_t* qs = dst + 2;
  const uint8_t* chunks = src + 16 + 4 * r;
  if (f == QuantFormat::q8_0) {
    for (int c = 0; c < 8; ++c) store4(qs + 4 * c, load4(chunks + 32 * c) ^ 0x80808080u);
    return;
  }
  // GGML's bytes 4j..4j+3: low nibbles from chunk j / 2, high ones from chunk j / 2 + 2.
  for (int j = 0; j < 4; ++j) {
    const uint32_t lo = load4(chunks + 32 * (j / 2)), hi = load4(chunks + 32 * (j / 2 + 2));
    store4(qs + 4 * j,
           j % 2 == 0 ? (lo & kLow) | ((hi & kLow) << 4) : ((lo >> 4) & kLow) | (hi & ~kLow));
  }
}

template <typename Block>
void each_block(QuantFormat f, int64_t out, int64_t in, Block&& block) {
  const int64_t blocks = in / quant_block_elems(f), bytes = quant_block_bytes(f),
                row_bytes = blocks * bytes;
  for (int64_t g = 0; g < out / 8; ++g)
    for (int64_t b = 0; b < blocks; ++b)
      for (int r = 0; r < 8; ++r)
        block((8 * g + r) * row_bytes + bytes * b, (g * blocks + b) * 8 * bytes, r);
}

}  // namespace

bool quant_x8_fits(QuantFormat f, int64_t out) {
  return (f == QuantFormat::q4_0 || f == QuantFormat::q8_0 || f == QuantFormat::q4_k) && out > 0 &&
         out % 8 == 0;
}

bool quant_is_x8(const QuantizedWeight& w) {
  return quant_x8_fits(w.format, w.out_features) && w.blocks.defined() && w.blocks.dim() == 2 &&
         w.blocks.size(0) == w.out_features / 8;
}

bool quant_x8_preferred(QuantFormat f, int64_t out) {
  auto probe = x8_probe.load();
  return quant_x8_fits(f, out) && probe && probe(f, out);
}

void set_quant_x8_probe(bool (*probe)(QuantFormat f, int64_t out)) { x8_probe.store(probe); }

void quant_x8_pack(QuantFormat f, const uint8_t* w, int64_t out, int64_t in, uint8_t* packed) {
  each_block(f, out, in,
             [&](int64_t at, int64_t to, int r) { pack_block(f, w + at, r, packed + to); });
}

void quant_x8_unpack(QuantFormat f, const uint8_t* packed, int64_t out, int64_t in, uint8_t* w) {
  each_block(f, out, in,
             [&](int64_t at, int64_t from, int r) { unpack_block(f, packed + from, r, w + at); });
}

QuantizedWeight quant_to_x8(const QuantizedWeight& w) {
  check_quantized_weight(w, "quant_to_x8");
  if (quant_is_x8(w)) return w;
  ZENITH_CHECK(quant_x8_fits(w.format, w.out_features), "[quant_to_x8] ", quant_name(w.format),
               " [", w.out_features, ", ", w.in_features,
               "] has no interleaved layout (q4_0, q8_0 or q4_k with rows a multiple of 8)");
  const Tensor blocks = w.blocks.contiguous();
  Tensor packed = Tensor::empty({w.out_features / 8, 8 * blocks.size(1)}, DType::u8);
  quant_x8_pack(w.format, blocks.data<uint8_t>(), w.out_features, w.in_features,
                packed.data<uint8_t>());
  return {packed, w.format, w.out_features, w.in_features};
}

QuantizedWeight quant_to_x8_in_place(const QuantizedWeight& w) {
  check_quantized_weight(w, "quant_to_x8_in_place");
  // Another tensor, or a view, holding the bytes would see them change: a copy then.
  if (quant_is_x8(w) || !quant_x8_fits(w.format, w.out_features) || !w.blocks.is_contiguous() ||
      w.blocks.impl_ptr().use_count() != 1 || w.blocks.storage().use_count() != 1)
    return quant_to_x8(w);
  const int64_t group_bytes = 8 * w.blocks.size(1);
  Tensor packed = w.blocks.view({w.out_features / 8, group_bytes});
  std::vector<uint8_t> group(size_t(group_bytes), 0);
  uint8_t* data = packed.data<uint8_t>();
  for (int64_t g = 0; g < w.out_features / 8; ++g) {
    quant_x8_pack(w.format, data + g * group_bytes, 8, w.in_features, group.data());
    std::memcpy(data + g * group_bytes, group.data(), group.size());
  }
  return {packed, w.format, w.out_features, w.in_features};
}

QuantizedWeight quant_to_ggml(const QuantizedWeight& w) {
  check_quantized_weight(w, "quant_to_ggml");
  if (!quant_is_x8(w)) return w;
  const Tensor packed = w.blocks.contiguous();
  Tensor blocks = Tensor::empty({w.out_features, packed.size(1) / 8}, DType::u8);
  quant_x8_unpack(w.format, packed.data<uint8_t>(), w.out_features, w.in_features,
                  blocks.data<uint8_t>());
  return {blocks, w.format, w.out_features, w.in_features};
}

}  // namespace zenith
