// A linear layer that can carry a LoRA adapter (PEFT's lora.Linear):
//   y = x W^T + b + B(A(dropout(x))) * scaling,   W [out, in], A [r, in], B [out, r],
// scaling = alpha / r, or alpha / sqrt(r) with rsLoRA. The base weight may be stored in bf16 or
// f16 (float32 compute); the adapter is float32. Parameters are named as PEFT's state dict
// names them once the adapter name is dropped: `weight`, `bias`, `lora_A.weight`,
// `lora_B.weight`.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "zenith/nn.h"
#include "zenith/quant.h"

namespace zenith::nn {

// LoRA's settings, declared once with PEFT's names and defaults (peft.LoraConfig): a layer's
// adapter (LoraLinear), an adapter_config.json (io::LoraConfig adds PEFT's other keys) and a
// fine-tuning run (finetune::Options::lora, with the recipe's alpha 16, dropout 0.05) carry it.
struct LoraSettings {
  int64_t r = 8;
  double lora_alpha = 8;
  double lora_dropout = 0;  // on the adapter's input, in training
  bool use_rslora = false;
  // Module names matched as PEFT matches them: a module whose path equals or ends with
  // "." + one of these; or every linear layer but lm_head (PEFT's "all-linear").
  std::vector<std::string> target_modules;
  bool all_linear = false;
  // alpha / r, or alpha / sqrt(r) with rsLoRA.
  double scaling() const;
};
// What one layer's adapter needs of the settings (the targets are the model's business).
using LoraSpec = LoraSettings;

class LoraLinear : public Cell {
 public:
  // Adopts `weight` [out, in] (any float dtype) and `bias` [out] (optional) as the base.
  explicit LoraLinear(Tensor weight, Tensor bias = Tensor());
  // A fresh layer with PyTorch's nn.Linear initialisation, stored in `dtype`.
  static std::shared_ptr<LoraLinear> create(int64_t in_features, int64_t out_features,
                                            bool has_bias, DType dtype = DType::f32);

  Tensor forward(const Tensor& x) override;

  // Mixed precision (finetune --amp): with `dtype` bf16 or f16 the base matmul takes its input,
  // weight and output rounded to `dtype` (a float32 weight is cast each forward, so it stays the
  // float32 master and its gradient comes back through the cast, rounded to `dtype` too; a
  // frozen weight at bf16 keeps the output and input gradient as their float32 sums);
  // `adapter_too` does the same for the LoRA matmuls. Compute stays float32 (a storage format on
  // CPUs without 16-bit arithmetic). float32: off.
  void set_compute_dtype(DType dtype, bool adapter_too = false);
  DType compute_dtype() const { return compute_; }

  // Holds the base weight as quantized blocks from now on (include/zenith/quant.h): forward
  // multiplies by them (ops::quantized_linear, float32), the float `weight` parameter is dropped
  // (weight() is then undefined) and the base gets no gradient; an adapter still trains.
  // `quantize` quantizes the current weight. Fails when the blocks' shape differs.
  void set_quantized_weight(QuantizedWeight weight);
  void quantize(QuantFormat format);
  const QuantizedWeight* quantized_weight() const { return quantized_ ? &*quantized_ : nullptr; }

  // Adds an adapter initialised as PEFT does: A kaiming-uniform (a = sqrt(5)), B zero, so the
  // layer computes what it did before. Replaces an adapter already there.
  void add_adapter(const LoraSpec& spec);
  // Adds an adapter with the given weights A [r, in] and B [out, r] (copied, as float32).
  void set_adapter(const LoraSpec& spec, const Tensor& A, const Tensor& B);
  void remove_adapter();
  bool has_adapter() const { return lora_A_ != nullptr; }
  const LoraSpec& adapter_spec() const { return spec_; }
  // B A scaling [out, in] in float32.
  Tensor delta_weight() const;
  // W += B A scaling, rounded once to W's dtype; the adapter is removed.
  void merge();

  int64_t in_features() const { return quantized_ ? quantized_->in_features : weight_.size(1); }
  int64_t out_features() const { return quantized_ ? quantized_->out_features : weight_.size(0); }
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }
  const Tensor& lora_A() const;  // [r, in]; fails without an adapter
  const Tensor& lora_B() const;  // [out, r]

  std::string type_name() const override { return "LoraLinear"; }
  std::string extra_repr() const override;

 private:
  Tensor weight_, bias_;
  LoraSpec spec_;
  DType compute_ = DType::f32;
  bool adapter_lowp_ = false;
  CellPtr lora_A_, lora_B_;  // Dense cells without bias: lora_A.weight, lora_B.weight
  std::optional<QuantizedWeight> quantized_;
};

}  // namespace zenith::nn
