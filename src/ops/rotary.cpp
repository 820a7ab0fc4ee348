// Rotary position embeddings in Hugging Face's convention (modeling_llama's apply_rotary_pos_emb
// and modeling_rope_utils' inverse frequencies): out = x cos + rotate_half(x) sin with
// rotate_half(x) = [-x2, x1] over the two halves of the last dim. The gradient is the op
// rotary_embedding_backward, defined here by a decomposition; the CPU fuses both.
#include <cmath>

#include "ops/op_utils.h"

namespace zenith::ops {
namespace {

constexpr const char* kOp = "rotary_embedding";
constexpr double kPi = 3.14159265358979323846;

// [-x2, x1] over the halves of the last dim.
Tensor rotate_half(const Tensor& x) {
  const int64_t last = x.dim() - 1, half = x.size(-1) / 2;
  return cat({neg(x.slice(last, half, 2 * half)), x.slice(last, 0, half)}, last);
}

// The transpose of rotate_half: [g2, -g1].
Tensor rotate_half_transposed(const Tensor& g) {
  const int64_t last = g.dim() - 1, half = g.size(-1) / 2;
  return cat({g.slice(last, half, 2 * half), neg(g.slice(last, 0, half))}, last);
}

// rotary_embedding_backward(dy, cos, sin) -> dx = dy cos + rotate_half^T(dy sin).
std::vector<Tensor> rotary_embedding_backward_composed(const std::vector<Tensor>& in,
                                                       const NoAttrs&) {
  const Tensor &dy = in[0], &cos = in[1], &sin = in[2];
  return {add(mul(dy, cos), rotate_half_transposed(mul(dy, sin)))};
}

ZENITH_REGISTER_DECOMPOSITION(rotary_embedding_backward, rotary_embedding_backward_composed);

bool low_precision(DType t) { return t == DType::bf16 || t == DType::f16; }

// cos or sin as a tensor that broadcasts to x: [B or 1, T, D] gains x's head dim.
Tensor table_for(const Tensor& table, const Tensor& x, const char* name) {
  ZENITH_CHECK(table.defined(), "[", kOp, "] undefined ", name);
  ZENITH_CHECK(is_floating(table.dtype()), "[", kOp, "] ", name, " must be floating, got ",
               dtype_name(table.dtype()));
  Tensor t = detail::plain(table);
  if (x.dim() == 4 && t.dim() == 3) t = t.unsqueeze(1);
  bool fits = t.dim() <= x.dim() && t.dim() >= 2;
  for (int64_t i = 1; fits && i <= t.dim(); ++i) {
    int64_t ts = t.shape()[size_t(t.dim() - i)], xs = x.shape()[size_t(x.dim() - i)];
    fits = ts == xs || (ts == 1 && i > 2);  // T and D must match
  }
  ZENITH_CHECK(fits, "[", kOp, "] ", name, " ", shape_str(table.shape()), " does not fit x ",
               shape_str(x.shape()), " (expected [T, D] or [B or 1, T, D] for x [B, H, T, D])");
  return t.dtype() == x.dtype() ? t : t.to(x.dtype());
}

}  // namespace

Tensor rotary_embedding(const Tensor& x_in, const Tensor& cos_in, const Tensor& sin_in) {
  ZENITH_CHECK(x_in.defined(), "[", kOp, "] undefined input");
  if (low_precision(x_in.dtype()))  // float32 compute, the result in x's dtype
    return rotary_embedding(x_in.to(DType::f32), cos_in, sin_in).to(x_in.dtype());
  detail::check_float(x_in, kOp);
  Tensor x = detail::plain(x_in);
  ZENITH_CHECK(x.dim() >= 2 && x.dim() <= 4, "[", kOp,
               "] expected x [B, H, T, D] (or [B, T, D], [T, D]), got ", shape_str(x.shape()));
  ZENITH_CHECK(x.size(-1) % 2 == 0, "[", kOp, "] head dim ", x.size(-1), " must be even (x ",
               shape_str(x.shape()), ")");
  Tensor cos = table_for(cos_in, x, "cos"), sin = table_for(sin_in, x, "sin");
  Tensor out = dispatch::call1<OpId::rotary_embedding>({x, cos, sin});
  if (autograd::needs_grad({x, cos, sin})) {
    const bool gx = x.requires_grad(), gc = cos.requires_grad(), gs = sin.requires_grad();
    // dx needs only the tables: x is kept for a trained table's gradient alone.
    const Tensor x_saved = gc || gs ? x : Tensor();
    autograd::record(
        kOp, {x, cos, sin}, {out}, [gx, gc, gs, x_saved, cos, sin](const std::vector<Tensor>& g) {
          Tensor dx =
              gx ? dispatch::call1<OpId::rotary_embedding_backward>({g[0], cos, sin}) : Tensor();
          Tensor dc = gc ? sum_to(mul(g[0], x_saved), cos.shape()) : Tensor();
          Tensor ds = gs ? sum_to(mul(g[0], rotate_half(x_saved)), sin.shape()) : Tensor();
          return std::vector<Tensor>{dx, dc, ds};
        });
  }
  return out;
}

Tensor rope_inv_freq(int64_t head_dim, const RopeOptions& o) {
  ZENITH_CHECK(head_dim > 0 && head_dim % 2 == 0,
               "[rope_inv_freq] head_dim must be even and "
               "positive, got ",
               head_dim);
  ZENITH_CHECK(o.theta > 0, "[rope_inv_freq] theta must be positive, got ", o.theta);
  const std::string& kind = o.scaling;
  ZENITH_CHECK(kind == "default" || kind == "none" || kind == "linear" || kind == "llama3",
               "[rope_inv_freq] rope_scaling type '", kind,
               "' not supported (supported: default, linear, llama3)");
  ZENITH_CHECK(kind == "default" || kind == "none" || o.factor > 0,
               "[rope_inv_freq] rope_scaling factor must be positive, got ", o.factor);
  const int64_t n = head_dim / 2;
  std::vector<double> inv(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    double f = 1.0 / std::pow(o.theta, double(2 * i) / double(head_dim));
    if (kind == "linear") {
      f /= o.factor;
    } else if (kind == "llama3") {
      // Long wavelengths (> old_len / low) are divided by factor, short ones (< old_len / high)
      // kept, and the band between interpolates linearly in old_len / wavelength.
      const double old_len = double(o.original_max_position_embeddings);
      const double low = o.low_freq_factor, high = o.high_freq_factor;
      ZENITH_CHECK(high > low,
                   "[rope_inv_freq] llama3 rope_scaling needs high_freq_factor > "
                   "low_freq_factor, got ",
                   high, " and ", low);
      const double wavelen = 2 * kPi / f;
      const double scaled = wavelen > old_len / low ? f / o.factor : f;
      if (wavelen >= old_len / high && wavelen <= old_len / low) {
        const double smooth = (old_len / wavelen - low) / (high - low);
        f = (1 - smooth) * scaled / o.factor + smooth * scaled;
      } else {
        f = scaled;
      }
    }
    inv[size_t(i)] = f;
  }
  return Tensor::from_vector(inv, {n}, DType::f64);
}

std::pair<Tensor, Tensor> rope_cos_sin(const Tensor& inv_freq, const Tensor& position_ids,
                                       DType dtype) {
  ZENITH_CHECK(inv_freq.defined() && inv_freq.dim() == 1,
               "[rope_cos_sin] expected inv_freq "
               "[D / 2]");
  ZENITH_CHECK(position_ids.defined() && position_ids.dim() == 2 &&
                   !is_floating(position_ids.dtype()) && position_ids.dtype() != DType::b8,
               "[rope_cos_sin] expected integer position_ids [B, T]");
  const int64_t half = inv_freq.numel(), d = 2 * half;
  const int64_t batch = position_ids.size(0), t = position_ids.size(1);
  std::vector<double> freq = inv_freq.to_double_vector();
  std::vector<int64_t> pos = position_ids.to_int_vector();
  std::vector<double> c(size_t(batch * t * d)), s(c.size());
  for (int64_t r = 0; r < batch * t; ++r)
    for (int64_t i = 0; i < half; ++i) {
      const double angle = double(pos[size_t(r)]) * freq[size_t(i)];
      const double ci = std::cos(angle), si = std::sin(angle);
      c[size_t(r * d + i)] = c[size_t(r * d + half + i)] = ci;
      s[size_t(r * d + i)] = s[size_t(r * d + half + i)] = si;
    }
  return {Tensor::from_vector(c, {batch, t, d}, dtype),
          Tensor::from_vector(s, {batch, t, d}, dtype)};
}

}  // namespace zenith::ops
