// An inference process holds each quantized weight once (models::pack_for_inference,
// core/quant_x8.h): the interleaved weights take the GGML blocks' bytes and no kernel copy beside
// them, give the logits of the model that was not packed bit for bit, and export (GGUF,
// `zenith quantize`'s safetensors) the GGML blocks they were read from, byte for byte.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "backend/cpu/quant_repack.h"
#include "core/quant_x8.h"
#include "models/llama_quant.h"
#include "support/temp_dir.h"
#include "support/tensor_bits.h"
#include "zenith/autograd.h"
#include "zenith/gguf.h"
#include "zenith/llama.h"
#include "zenith/ops.h"

namespace zenith::testing {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

models::LlamaConfig small_config() {
  return models::parse_llama_config(
      R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 128,
          "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
          "num_key_value_heads": 2, "vocab_size": 96, "max_position_embeddings": 64,
          "tie_word_embeddings": false})",
      "small_config");
}

TEST(LlamaX8, InferenceHoldsEachQuantizedWeightOnceAndExportsItsBlocks) {
  TempDir dir("llama_x8");
  // q4_k: the weights of 128 inputs are q4_0 rows (no super-block of 256), the others q4_K.
  for (QuantFormat f : {QuantFormat::q8_0, QuantFormat::q4_0, QuantFormat::q4_k}) {
    SCOPED_TRACE(quant_name(f));
    models::GgufExportOptions options;
    options.dtype = quant_name(f);
    const std::string in = dir / (std::string(quant_name(f)) + ".gguf");
    {
      models::Llama model(small_config());
      model.quantize(f);
      models::save_gguf(model, nullptr, in, options);
    }
    auto plain = models::load_gguf(in), packed = models::load_gguf(in);
    int64_t ggml_bytes = 0, expected = 0;
    std::vector<const void*> at;  // where each weight's blocks lie before packing
    for (const auto& [path, layer] : packed->linear_layers())
      at.push_back(layer->quantized_weight()->blocks.raw_data());
    for (const auto& [path, layer] : plain->linear_layers()) {
      const QuantizedWeight* q = layer->quantized_weight();
      ASSERT_TRUE(q) << path;
      ggml_bytes += int64_t(q->blocks.nbytes());
      if (quant_x8_preferred(q->format, q->out_features)) expected += int64_t(q->blocks.nbytes());
    }
    // The backend told core which weights its kernels read interleaved.
    EXPECT_EQ(quant_x8_preferred(f, 8), cpu::x8_applies(cpu::quant_isa(), f, 8));
    EXPECT_EQ(models::pack_for_inference(*packed), expected);
    EXPECT_EQ(models::pack_for_inference(*packed), 0);  // once
    // Held once: the packed model's weights take the blocks' bytes, and a forward pass makes no
    // copy of them (a model not packed makes one).
    const auto a = plain->linear_layers(), b = packed->linear_layers();
    ASSERT_EQ(a.size(), b.size());
    int64_t held = 0, packed_f = 0;  // packed_f: weights of format f held interleaved
    for (size_t i = 0; i < a.size(); ++i) {
      const QuantizedWeight &p = *a[i].second->quantized_weight(),
                            &q = *b[i].second->quantized_weight();
      held += int64_t(q.blocks.nbytes());
      packed_f += q.format == f && quant_is_x8(q) ? 1 : 0;
      EXPECT_EQ(quant_is_x8(q), quant_x8_preferred(q.format, q.out_features)) << a[i].first;
      EXPECT_EQ(q.blocks.raw_data(), at[i]) << a[i].first << " moved: packed as a copy";
      EXPECT_TRUE(same_bits(quant_to_ggml(q).blocks, p.blocks)) << a[i].first;
      EXPECT_TRUE(same_bits(dequantize_weight(q), dequantize_weight(p))) << a[i].first;
    }
    EXPECT_EQ(held, ggml_bytes);
    EXPECT_EQ(packed_f > 0, cpu::x8_applies(cpu::quant_isa(), f, 8));
    plain->eval();
    packed->eval();
    NoGradGuard no_grad;
    Tensor ids = Tensor::from_vector(std::vector<int64_t>{1, 5, 9, 3, 7}, {1, 5});
    const int64_t cached = cpu::x8_cached_bytes();
    Tensor y = packed->forward(ids);
    EXPECT_EQ(cpu::x8_cached_bytes(), cached) << "a kernel copied a packed weight";
    EXPECT_TRUE(same_bits(y, plain->forward(ids)));
    EXPECT_EQ(cpu::x8_cached_bytes() > cached, expected > 0);  // the plain model's copies
    // Exports write the GGML blocks read: the GGUF file again, byte for byte.
    const std::string out = dir / (std::string(quant_name(f)) + "-again.gguf");
    models::save_gguf(*packed, nullptr, out, options);
    EXPECT_TRUE(slurp(in) == slurp(out)) << "the re-exported GGUF differs from " << in;
    const std::string qdir = dir / (std::string(quant_name(f)) + "-quantized");
    models::save_quantized(*packed, qdir);
    const auto back = models::load_quantized(qdir)->linear_layers();
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_TRUE(same_bits(back[i].second->quantized_weight()->blocks,
                            a[i].second->quantized_weight()->blocks))
          << a[i].first;
  }
}

// Training with activation checkpointing (QLoRA's usual recipe): the checkpoint's first forward
// runs without gradients, yet it is training's, so the kernels make no repacked copy of the
// frozen 4-bit base for it (a copy was made there and dropped by the recompute: the base's bytes
// twice at the peak of every step).
TEST(LlamaX8, ActivationCheckpointingMakesNoRepackedCopy) {
  models::Llama model(small_config());
  model.quantize(QuantFormat::q4_0);
  model.set_activation_checkpointing(true);
  model.train();
  int64_t trainable = 0;
  for (const auto& [name, p] : model.named_parameters()) trainable += p.requires_grad() ? 1 : 0;
  ASSERT_GT(trainable, 0) << "the checkpointed layers need a parameter that takes gradients";
  Tensor ids = Tensor::from_vector(std::vector<int64_t>{1, 5, 9, 3, 7, 2}, {1, 6});
  const int64_t cached = cpu::x8_cached_bytes();
  Tensor loss = ops::sum(model.forward(ids).reshape({-1}), {0});
  EXPECT_EQ(cpu::x8_cached_bytes(), cached) << "the checkpoint's first forward made a copy";
  loss.backward();
  EXPECT_EQ(cpu::x8_cached_bytes(), cached);
  // The same model evaluated without gradients (inference, not packed) still takes the copy.
  model.eval();
  NoGradGuard no_grad;
  model.forward(ids);
  EXPECT_EQ(cpu::x8_cached_bytes() > cached,
            quant_x8_preferred(QuantFormat::q4_0, small_config().hidden_size));
}

}  // namespace
}  // namespace zenith::testing
