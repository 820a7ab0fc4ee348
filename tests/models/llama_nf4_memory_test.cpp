// The bytes of QLoRA's frozen nf4 base (Llama::quantize(nf4)) per weight, measured on one layer
// of the 110M shape (hidden 768, MLP 2048, an untied head): 4-bit levels, an 8-bit absmax code per
// 64 weights (double quantization, where bitsandbytes' single quantization keeps a float32
// absmax: 0.5 bits) and each row's float32 group scale and offset; against q4_0's 4.5 bits.
#include <gtest/gtest.h>

#include "zenith/llama.h"
#include "zenith/quant.h"

namespace zenith::testing {
namespace {

TEST(LlamaNf4Memory, BaseBytesPerWeight) {
  const models::LlamaConfig config = models::parse_llama_config(
      R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 768,
          "intermediate_size": 2048, "num_hidden_layers": 1, "num_attention_heads": 12,
          "num_key_value_heads": 12, "vocab_size": 2048, "max_position_embeddings": 64,
          "tie_word_embeddings": false})",
      "110M shape, one layer");
  for (QuantFormat format : {QuantFormat::nf4, QuantFormat::q4_0}) {
    models::Llama model(config);
    EXPECT_EQ(model.quantize(format).size(), 8u);  // q, k, v, o, gate, up, down and lm_head
    int64_t bytes = 0, weights = 0;
    for (const auto& [path, layer] : model.linear_layers()) {
      const QuantizedWeight* q = layer->quantized_weight();
      ASSERT_NE(q, nullptr) << path;
      bytes += q->blocks.nbytes();
      weights += q->out_features * q->in_features;
    }
    const double bits = 8.0 * double(bytes) / double(weights);
    std::printf("[measured] %s base: %lld bytes for %lld weights, %.4f bits a weight\n",
                quant_name(format), static_cast<long long>(bytes), static_cast<long long>(weights),
                bits);
    if (format == QuantFormat::q4_0) {
      EXPECT_DOUBLE_EQ(bits, 4.5);
      continue;
    }
    // 7168 + 2048 rows of 768 inputs (12 blocks: 404 bytes), 768 rows of 2048 (32: 1064 bytes)
    EXPECT_EQ(bytes, (7168 + 2048) * 404 + 768 * 1064);
    EXPECT_NEAR(bits, 4.20, 0.01);
  }
}

}  // namespace
}  // namespace zenith::testing
