// LoraLinear: a linear layer with an optional unmerged LoRA adapter (PEFT's lora.Linear).
#include "zenith/lora.h"

#include <cmath>
#include <sstream>

#include "zenith/autograd.h"

namespace zenith::nn {
namespace {

// One bias-free linear map held as `weight`: the lora_A / lora_B children, so their
// parameters are named lora_A.weight and lora_B.weight as in PEFT's files.
class AdapterWeight : public Cell {
 public:
  explicit AdapterWeight(Tensor w) { weight_ = register_parameter("weight", std::move(w)); }
  Tensor forward(const Tensor& x) override { return ops::linear(x, weight_); }
  const Tensor& weight() const { return weight_; }
  std::string type_name() const override { return "Linear"; }
  std::string extra_repr() const override {
    std::ostringstream os;
    os << "in_features=" << weight_.size(1) << ", out_features=" << weight_.size(0)
       << ", bias=false";
    return os.str();
  }

 private:
  Tensor weight_;
};

bool is_16bit(DType t) { return t == DType::bf16 || t == DType::f16; }

// x rounded to `dtype` and back (its gradient rounded alike): a value stored in low precision.
Tensor round_to(const Tensor& x, DType dtype) { return x.to(dtype).to(x.dtype()); }

// x [.., in] float32 times a frozen bfloat16 weight [out, in] in bfloat16 arithmetic where the
// CPU has it: x, and the gradient of the result, are rounded to bfloat16 as they enter the
// products; the result and dx = dy W are the float32 sums, not rounded again (a float32 bias of
// zeros makes ops::linear's result float32), so neither takes a conversion pass of its own.
Tensor linear_bf16(const Tensor& x, const Tensor& w) {
  Tensor y;
  {
    NoGradGuard no_grad;
    y = ops::linear(x.to(DType::bf16), w, Tensor::zeros({w.size(0)}));
  }
  if (autograd::needs_grad({x}))
    autograd::record("linear_bf16", {x}, {y}, [w](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{
          ops::linear(g[0].to(DType::bf16), w.t(), Tensor::zeros({w.size(1)}))};
    });
  return y;
}

// linear in low precision: input, weight and output rounded to `dtype`, float32 accumulation.
// Without a bias both operands are 16-bit: bfloat16 arithmetic where the CPU has it (products of
// bfloat16 values are exact in float32: the same result up to the order of the sums). A frozen
// bfloat16 weight keeps the float32 sums (linear_bf16).
Tensor linear_lowp(const Tensor& x, const Tensor& weight, const Tensor& bias, DType dtype) {
  Tensor w = weight.dtype() == dtype ? weight : weight.to(dtype);
  if (!bias.defined() && dtype == DType::bf16 && !w.requires_grad() && x.dtype() == DType::f32)
    return linear_bf16(x, w);
  if (!bias.defined()) return ops::linear(x.to(dtype), w).to(x.dtype());
  Tensor b = bias.dtype() != x.dtype() ? bias.to(x.dtype()) : bias;
  return round_to(ops::linear(round_to(x, dtype), w, b), dtype);
}

// Inference on 16-bit weights with a 16-bit compute dtype: up to this many rows (decode) take
// float32 arithmetic on the 16-bit weights, which the GEMV streams at memory speed (oneDNN's
// bf16 matmul was slower there, docs/quantization.md); more rows (prefill, perplexity) take the
// 16-bit products.
constexpr int64_t kDecodeRows = 8;

const Tensor& adapter_weight(const CellPtr& cell) {
  return static_cast<const AdapterWeight&>(*cell).weight();
}

}  // namespace

double LoraSettings::scaling() const {
  return lora_alpha / (use_rslora ? std::sqrt(double(r)) : double(r));
}

LoraLinear::LoraLinear(Tensor weight, Tensor bias) {
  ZENITH_CHECK(weight.defined() && weight.dim() == 2 && is_floating(weight.dtype()),
               "[LoraLinear] expected a floating weight [out, in], got ",
               weight.defined() ? shape_str(weight.shape()) : "none");
  weight_ = register_parameter("weight", std::move(weight));
  if (bias.defined()) {
    ZENITH_CHECK(bias.dim() == 1 && bias.size(0) == weight_.size(0), "[LoraLinear] bias ",
                 shape_str(bias.shape()), " does not fit weight ", shape_str(weight_.shape()));
    bias_ = register_parameter("bias", std::move(bias));
  }
}

std::shared_ptr<LoraLinear> LoraLinear::create(int64_t in_features, int64_t out_features,
                                               bool has_bias, DType dtype) {
  ZENITH_CHECK(in_features > 0 && out_features > 0,
               "[LoraLinear] in_features and out_features must be positive, got ", in_features,
               " and ", out_features);
  Tensor w = Tensor::empty({out_features, in_features});
  init::kaiming_uniform_(w, std::sqrt(5.0));
  Tensor b;
  if (has_bias) {
    const double bound = 1.0 / std::sqrt(double(in_features));
    b = Tensor::uniform({out_features}, -bound, bound);
  }
  if (dtype != DType::f32) {
    w = w.to(dtype);
    if (b.defined()) b = b.to(dtype);
  }
  return std::make_shared<LoraLinear>(w, b);
}

void LoraLinear::set_compute_dtype(DType dtype, bool adapter_too) {
  ZENITH_CHECK(dtype == DType::f32 || is_16bit(dtype),
               "[LoraLinear] compute dtype must be float32, bfloat16 or float16, got ",
               dtype_name(dtype));
  compute_ = dtype;
  adapter_lowp_ = adapter_too && dtype != DType::f32;
}

Tensor LoraLinear::forward(const Tensor& x) {
  if (quantized_) {
    Tensor y = ops::quantized_linear(x, *quantized_);
    if (bias_.defined()) y = ops::add(y, bias_.dtype() == y.dtype() ? bias_ : bias_.to(y.dtype()));
    if (!lora_A_) return y;
    Tensor h = spec_.lora_dropout > 0 && training() ? ops::dropout(x, spec_.lora_dropout, true) : x;
    Tensor delta = lora_B_->forward(lora_A_->forward(h.dtype() == y.dtype() ? h : h.to(y.dtype())));
    return ops::add(y, ops::mul(delta, spec_.scaling()));
  }
  const bool decode = !training() && weight_.dtype() == compute_ && x.dim() >= 1 &&
                      x.numel() <= kDecodeRows * x.size(-1);
  if (compute_ != DType::f32 && x.dtype() == DType::f32 && !decode) {
    Tensor y = linear_lowp(x, weight_, bias_, compute_);
    if (!lora_A_) return y;
    Tensor h = spec_.lora_dropout > 0 && training() ? ops::dropout(x, spec_.lora_dropout, true) : x;
    Tensor delta = adapter_lowp_ ? linear_lowp(linear_lowp(h, lora_A(), Tensor(), compute_),
                                               lora_B(), Tensor(), compute_)
                                 : lora_B_->forward(lora_A_->forward(h));
    return ops::add(y, ops::mul(delta, spec_.scaling()));
  }
  // A bfloat16/float16 weight (and bias) with float32 x: ops::linear computes in float32 without
  // a float32 copy of the weight. Other mixes (a float64 x) cast to x's dtype.
  const bool lowp = x.dtype() == DType::f32 && is_16bit(weight_.dtype());
  Tensor w = weight_.dtype() == x.dtype() || lowp ? weight_ : ops::cast(weight_, x.dtype());
  Tensor bias = bias_;
  if (bias.defined() && bias.dtype() != x.dtype() && !(lowp && bias.dtype() == weight_.dtype()))
    bias = ops::cast(bias, x.dtype());
  Tensor y = ops::linear(x, w, bias);
  if (!lora_A_) return y;
  Tensor h = spec_.lora_dropout > 0 && training() ? ops::dropout(x, spec_.lora_dropout, true) : x;
  Tensor delta = lora_B_->forward(lora_A_->forward(h));
  return ops::add(y, ops::mul(delta, spec_.scaling()));
}

void LoraLinear::set_quantized_weight(QuantizedWeight weight) {
  check_quantized_weight(weight, "LoraLinear");
  ZENITH_CHECK(weight.out_features == out_features() && weight.in_features == in_features(),
               "[LoraLinear] quantized weight [", weight.out_features, ", ", weight.in_features,
               "] does not fit a layer [", out_features(), ", ", in_features(), "]");
  weight.blocks = weight.blocks.contiguous();
  quantized_ = std::move(weight);
  if (weight_.defined()) {
    remove_entry("weight");
    weight_ = Tensor();
  }
}

void LoraLinear::quantize(QuantFormat format) {
  if (quantized_) {
    ZENITH_CHECK(quantized_->format == format, "[LoraLinear] the weight is already ",
                 quant_name(quantized_->format), "; cannot requantize it to ", quant_name(format));
    return;
  }
  set_quantized_weight(quantize_weight(weight_.detach(), format));
}

void LoraLinear::add_adapter(const LoraSpec& spec) {
  ZENITH_CHECK(spec.r > 0, "[LoraLinear] LoRA rank r must be positive, got ", spec.r);
  Tensor A = Tensor::empty({spec.r, in_features()});
  init::kaiming_uniform_(A, std::sqrt(5.0));
  set_adapter(spec, A, Tensor::zeros({out_features(), spec.r}));
}

void LoraLinear::set_adapter(const LoraSpec& spec, const Tensor& A, const Tensor& B) {
  ZENITH_CHECK(spec.r > 0, "[LoraLinear] LoRA rank r must be positive, got ", spec.r);
  ZENITH_CHECK(spec.lora_dropout >= 0 && spec.lora_dropout < 1,
               "[LoraLinear] lora dropout must be in [0, 1), got ", spec.lora_dropout);
  const Shape want_a = {spec.r, in_features()}, want_b = {out_features(), spec.r};
  ZENITH_CHECK(A.shape() == want_a && B.shape() == want_b, "[LoraLinear] adapter A ",
               shape_str(A.shape()), " and B ", shape_str(B.shape()), " do not fit a layer ",
               shape_str({out_features(), in_features()}), " with r ", spec.r, ": expected A ",
               shape_str(want_a), " and B ", shape_str(want_b));
  if (has_adapter()) remove_adapter();
  spec_ = spec;
  // Own float32 copies: the adapter trains in float32 whatever the file held.
  lora_A_ = register_cell("lora_A", std::make_shared<AdapterWeight>(A.to(DType::f32).clone()));
  lora_B_ = register_cell("lora_B", std::make_shared<AdapterWeight>(B.to(DType::f32).clone()));
  lora_A_->set_train(training());
  lora_B_->set_train(training());
}

void LoraLinear::remove_adapter() {
  if (!has_adapter()) return;
  unregister_cell("lora_A");
  unregister_cell("lora_B");
  lora_A_ = lora_B_ = nullptr;
}

const Tensor& LoraLinear::lora_A() const {
  ZENITH_CHECK(has_adapter(), "[LoraLinear] the layer has no adapter");
  return adapter_weight(lora_A_);
}

const Tensor& LoraLinear::lora_B() const {
  ZENITH_CHECK(has_adapter(), "[LoraLinear] the layer has no adapter");
  return adapter_weight(lora_B_);
}

Tensor LoraLinear::delta_weight() const {
  NoGradGuard no_grad;
  return ops::mul(ops::matmul(lora_B(), lora_A()), spec_.scaling());
}

void LoraLinear::merge() {
  ZENITH_CHECK(has_adapter(), "[LoraLinear] merge: the layer has no adapter");
  ZENITH_CHECK(!quantized_, "[LoraLinear] merge: the base weight is quantized (",
               quant_name(quantized_->format), "); merge the adapter before quantizing");
  NoGradGuard no_grad;
  Tensor merged = ops::add(weight_.to(DType::f32), delta_weight());
  Tensor w = weight_;  // the same storage: optimizers and views keep seeing the weight
  w.copy_(merged);     // rounds once to the weight's dtype
  remove_adapter();
}

std::string LoraLinear::extra_repr() const {
  std::ostringstream os;
  os << "in_features=" << in_features() << ", out_features=" << out_features()
     << ", bias=" << (bias_.defined() ? "true" : "false")
     << ", dtype=" << (quantized_ ? quant_name(quantized_->format) : dtype_name(weight_.dtype()));
  if (has_adapter())
    os << ", r=" << spec_.r << ", alpha=" << spec_.lora_alpha
       << (spec_.use_rslora ? ", rslora" : "");
  return os.str();
}

}  // namespace zenith::nn
