// llama2.c checkpoints (version 0 "legacy" and version 1, float32; see zenith/llama2c.h), read
// straight into tensors named as Hugging Face names them.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "zenith/autograd.h"
#include "zenith/io.h"
#include "zenith/llama2c.h"

namespace zenith::io {

namespace {

constexpr uint32_t kMagic = 0x616b3432;  // "ak42"
constexpr uint64_t kVersion1HeaderBytes = 256;

int32_t read_i32(const unsigned char* p) {
  int32_t v;
  std::memcpy(&v, p, 4);  // little-endian, as x86 writes it
  return v;
}

std::string describe(const Llama2cHeader& h) {
  return detail::concat(
      "version ", h.version, ": dim ", h.dim, ", hidden_dim ", h.hidden_dim, ", ", h.n_layers,
      " layers, ", h.n_heads, " heads, ", h.n_kv_heads, " kv heads, vocab ", h.vocab_size,
      h.shared_classifier ? " (shared classifier)" : " (own classifier)", ", seq_len ", h.seq_len);
}

void check_header(const std::string& path, const Llama2cHeader& h) {
  auto field = [&](const char* name, int32_t value, int32_t limit) {
    ZENITH_CHECK(value > 0 && value <= limit, "[llama2c] ", path, ": header field ", name, " = ",
                 value, " is out of range (1..", limit, "): not a llama2.c checkpoint?");
  };
  field("dim", h.dim, 1 << 20);
  field("hidden_dim", h.hidden_dim, 1 << 22);
  field("n_layers", h.n_layers, 1 << 12);
  field("n_heads", h.n_heads, 1 << 12);
  field("n_kv_heads", h.n_kv_heads, 1 << 12);
  field("vocab_size", h.vocab_size, 1 << 24);
  field("seq_len", h.seq_len, 1 << 24);
  ZENITH_CHECK(h.dim % h.n_heads == 0, "[llama2c] ", path, ": header field dim = ", h.dim,
               " is not a multiple of n_heads = ", h.n_heads);
  ZENITH_CHECK(h.n_heads % h.n_kv_heads == 0, "[llama2c] ", path,
               ": header field n_kv_heads = ", h.n_kv_heads,
               " does not divide n_heads = ", h.n_heads);
  ZENITH_CHECK((h.dim / h.n_heads) % 2 == 0, "[llama2c] ", path,
               ": head size dim / n_heads = ", h.dim / h.n_heads,
               " is odd; rotary embeddings need it even");
}

Llama2cHeader read_header(const std::string& path, uint64_t file_size, uint64_t* data_start) {
  unsigned char raw[kVersion1HeaderBytes] = {};
  std::ifstream in(path, std::ios::binary);
  ZENITH_CHECK(in, "[llama2c] ", path, ": cannot open");
  in.read(reinterpret_cast<char*>(raw),
          std::streamsize(std::min<uint64_t>(file_size, sizeof(raw))));
  ZENITH_CHECK(file_size >= 28, "[llama2c] ", path, ": ", file_size,
               " bytes, too short for a llama2.c header (28 bytes)");
  Llama2cHeader h;
  const unsigned char* params = raw;
  if (uint32_t(read_i32(raw)) == kMagic) {
    ZENITH_CHECK(file_size >= kVersion1HeaderBytes, "[llama2c] ", path, ": ", file_size,
                 " bytes, too short for the 256-byte version-1 header");
    h.version = read_i32(raw + 4);
    ZENITH_CHECK(
        h.version == 1, "[llama2c] ", path, ": header field version = ", h.version,
        ": only version 0 (legacy) and 1 (float32) are supported; version 2 is int8 (Q8_0)");
    params = raw + 8;
    ZENITH_CHECK(raw[36] <= 1, "[llama2c] ", path,
                 ": header field shared_classifier = ", int(raw[36]), " must be 0 or 1");
    h.shared_classifier = raw[36] == 1;
    *data_start = kVersion1HeaderBytes;
  } else {
    *data_start = 28;
  }
  h.dim = read_i32(params);
  h.hidden_dim = read_i32(params + 4);
  h.n_layers = read_i32(params + 8);
  h.n_heads = read_i32(params + 12);
  h.n_kv_heads = read_i32(params + 16);
  h.vocab_size = read_i32(params + 20);
  h.seq_len = read_i32(params + 24);
  if (h.version == 0) {
    h.shared_classifier = h.vocab_size > 0;  // negative: an unshared classifier follows
    if (h.vocab_size < 0 && h.vocab_size > INT32_MIN) h.vocab_size = -h.vocab_size;
  }
  check_header(path, h);
  return h;
}

}  // namespace

Tensor rotary_interleaved_to_halves(const Tensor& w, int64_t n_heads) {
  ZENITH_CHECK(w.dim() == 2 && n_heads > 0 && w.size(0) % (2 * n_heads) == 0,
               "[llama2c] a rotary projection [n_heads * head_size, in] with an even head size, "
               "got ",
               shape_str(w.shape()), " for ", n_heads, " heads");
  const int64_t out = w.size(0), in = w.size(1);
  return w.reshape({n_heads, out / n_heads / 2, 2, in})
      .transpose(1, 2)
      .contiguous()
      .view({out, in});
}

Llama2cCheckpoint read_llama2c(const std::string& path) {
  NoGradGuard no_grad;
  std::error_code ec;
  const uint64_t file_size = std::filesystem::file_size(path, ec);
  ZENITH_CHECK(!ec, "[llama2c] ", path, ": cannot open: ", ec.message());
  uint64_t offset = 0;
  Llama2cCheckpoint ck;
  ck.header = read_header(path, file_size, &offset);
  const Llama2cHeader& h = ck.header;
  const int64_t D = h.dim, H = h.hidden_dim, V = h.vocab_size, L = h.n_layers;
  const int64_t head = D / h.n_heads, kv = head * h.n_kv_heads;

  // The file's blocks in order; per-layer blocks hold one [shape] tensor per layer.
  std::vector<TensorInfo> infos;
  auto block = [&](const std::string& name, const Shape& shape, bool per_layer) {
    const uint64_t bytes = uint64_t(shape_numel(shape)) * 4;
    for (int64_t l = 0; l < (per_layer ? L : 1); ++l) {
      std::string n = per_layer ? "model.layers." + std::to_string(l) + "." + name : name;
      if (!name.empty()) infos.push_back({n, DType::f32, shape, path, offset, bytes});
      offset += bytes;
    }
  };
  auto embed = [&] { block("model.embed_tokens.weight", {V, D}, false); };
  auto norms_att = [&] { block("input_layernorm.weight", {D}, true); };
  auto norms_ffn = [&] { block("post_attention_layernorm.weight", {D}, true); };
  auto norm_final = [&] { block("model.norm.weight", {D}, false); };
  auto matrices = [&] {
    block("self_attn.q_proj.weight", {D, D}, true);
    block("self_attn.k_proj.weight", {kv, D}, true);
    block("self_attn.v_proj.weight", {kv, D}, true);
    block("self_attn.o_proj.weight", {D, D}, true);
  };
  auto mlp = [&] {
    block("mlp.gate_proj.weight", {H, D}, true);  // w1
    block("mlp.down_proj.weight", {D, H}, true);  // w2
    block("mlp.up_proj.weight", {H, D}, true);    // w3
  };
  if (h.version == 0) {
    embed();
    norms_att();
    matrices();
    norms_ffn();
    mlp();
    norm_final();
    block("", {int64_t(h.seq_len), head / 2}, false);  // freq_cis_real
    block("", {int64_t(h.seq_len), head / 2}, false);  // freq_cis_imag
  } else {
    norms_att();
    norms_ffn();
    norm_final();
    embed();
    matrices();
    mlp();
  }
  if (!h.shared_classifier) block("lm_head.weight", {V, D}, false);
  ZENITH_CHECK(offset == file_size, "[llama2c] ", path, ": file is ", file_size,
               " bytes, but a checkpoint with this header (", describe(h), ") is ", offset,
               " bytes: ", offset > file_size ? "truncated" : "trailing data",
               ", or not a llama2.c checkpoint");

  ck.tensors = read_tensors(infos);
  for (int64_t l = 0; l < L; ++l) {
    const std::string layer = "model.layers." + std::to_string(l) + ".self_attn.";
    Tensor& q = ck.tensors.at(layer + "q_proj.weight");
    q = rotary_interleaved_to_halves(q, h.n_heads);
    Tensor& k = ck.tensors.at(layer + "k_proj.weight");
    k = rotary_interleaved_to_halves(k, h.n_kv_heads);
  }
  return ck;
}

}  // namespace zenith::io
