// The lines zenith finetune logs before training: its settings as torchtune/PEFT users expect
// them, the data it read and how batches are shaped.
#include "train/finetune_run.h"
#include "zenith/cpu_features.h"

namespace zenith::finetune::detail {
namespace {

void log_weights(const Options& o, models::Llama& model, const RunShape& shape, const Log& log) {
  if (o.method == Method::lora)
    log(format(
        "[finetune] LoRA r %lld, alpha %g (scaling %g), dropout %g, targets %s: %zu layers; "
        "base frozen in %s",
        (long long)o.lora.r, o.lora.lora_alpha, o.lora.scaling(), o.lora.lora_dropout,
        lora_targets(o.lora).c_str(), shape.adapted_layers, dtype_name(model.weight_dtype())));
  else
    log(o.init == Init::random
            ? "[finetune] training from random weights (" + model_config_path(o) + "), float32"
            : "[finetune] full fine-tuning, float32 weights");
}

void log_precision(const Options& o, const nn::DynamicLossScaler* scaler, const Log& log) {
  if (o.amp == Amp::O0) {
    log("[finetune] amp O0: float32 compute");
    return;
  }
  // bfloat16 products (two bfloat16 operands, backend/cpu/gemm_bf16.cpp) are real bfloat16
  // arithmetic where the CPU has it; elsewhere the low dtype only rounds values.
  const bool bf16 = o.amp_dtype == DType::bf16;
  const std::string arithmetic =
      bf16 && bf16_arithmetic()
          ? "bf16 arithmetic (avx512_bf16): the linear layers' and attention's products run in "
            "bfloat16, float32 accumulation"
          : std::string(bf16 ? "float32 arithmetic (no avx512_bf16, or ZENITH_BF16_COMPUTE=0)"
                             : "float32 arithmetic") +
                ": " + dtype_name(o.amp_dtype) + " is a storage format (values rounded to it)";
  log(format("[finetune] amp %s: %s in %s, float32 master weights and norms%s; %s", name(o.amp),
             o.amp == Amp::O1 ? "linear layers" : "linear layers, LoRA matmuls and hidden states",
             dtype_name(o.amp_dtype),
             scaler ? ", dynamic loss scaling (2^16, x2 after 2000 clean steps, x0.5 and skip "
                      "on inf/NaN)"
                    : "",
             arithmetic.c_str()));
}

void log_checkpointing(const Options& o, models::Llama& model, const Log& log) {
  if (!o.activation_checkpointing) return;
  std::string keeps;
  for (const std::string& k : model.checkpointing_keeps()) keeps += (keeps.empty() ? "" : ",") + k;
  log("[finetune] activation checkpointing per decoder layer, " +
      (keeps.empty() ? std::string("full: each layer recomputed from its input in backward")
                     : o.activation_checkpointing_policy + ": keeps the outputs of " + keeps +
                           ", recomputes the rest in backward"));
}

void log_data(const Options& o, const RunShape& shape, const Log& log) {
  const Data& data = *shape.sequences;
  std::string formats;
  for (const auto& [f, count] : data.formats)
    formats += (formats.empty() ? "" : ", ") + std::to_string(count) + " " + f;
  log(
      format("[finetune] %s: %zu examples (%s), %lld truncated to %lld tokens, %lld dropped "
             "without a learned token; batch %lld x accumulate %lld, %lld steps per epoch%s",
             o.data.c_str(), data.examples.size(), formats.c_str(), (long long)data.truncated,
             (long long)shape.max_seq_len, (long long)data.skipped, (long long)o.batch_size,
             (long long)o.accumulate_steps, (long long)shape.steps_per_epoch,
             o.train_on_prompt ? ", training on prompts too" : ", prompts masked"));
  if (o.packing)
    log(format("[finetune] packing: %zu examples in %zu sequences of at most %lld tokens",
               shape.data->examples.size(), data.examples.size(), (long long)shape.max_seq_len));
  if (shape.pad_to > 1)
    log(format("[finetune] batches padded to a multiple of %lld tokens (at most %lld lengths)%s",
               (long long)shape.pad_to,
               (long long)((shape.max_seq_len + shape.pad_to - 1) / shape.pad_to),
               o.pad_to_multiple_of > 0
                   ? ""
                   : ": graph mode's default, each batch length being a graph to capture; "
                     "--pad-to-multiple-of 1 pads to the longest only"));
}

}  // namespace

void log_settings(const Options& o, models::Llama& model, const RunShape& shape,
                  const nn::DynamicLossScaler* scaler, const Log& log) {
  log_weights(o, model, shape, log);
  log_precision(o, scaler, log);
  log_checkpointing(o, model, log);
  log(format("[finetune] trainable %lld of %lld parameters (%.3f%%)", (long long)shape.trainable,
             (long long)shape.total, 100.0 * double(shape.trainable) / double(shape.total)));
  log(
      format("[finetune] AdamW lr %g (betas 0.9, 0.999, eps 1e-8, weight decay %g), %s schedule, "
             "warmup %lld of %lld steps, clip %g",
             o.lr, o.weight_decay, name(o.schedule), (long long)shape.warmup,
             (long long)shape.total_steps, o.clip_grad_norm));
  log_data(o, shape, log);
}

}  // namespace zenith::finetune::detail
