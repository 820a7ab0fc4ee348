// models::Llama with quantized linear layers (src/models/llama_quant.cpp): logits follow the
// float model within each format's error, q4_k's fallback, blocks kept bit for bit through
// save_quantized / load_quantized, and load_quantizing (QLoRA's base quantized weight by weight
// as it is read) equal to loading whole and quantizing (the perplexity bounds are checked through
// the command line, tests/cli/quantize_cli_test.cpp).
#include "models/llama_quant.h"

#include <gtest/gtest.h>

#include "support/op_check.h"
#include "support/temp_dir.h"
#include "zenith/llama.h"

namespace zenith::testing {
namespace {

using models::Llama;

models::LlamaConfig small_config(int64_t hidden, int64_t intermediate) {
  return models::parse_llama_config(
      R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": )" +
          std::to_string(hidden) + R"(, "intermediate_size": )" + std::to_string(intermediate) +
          R"(, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
          "vocab_size": 96, "max_position_embeddings": 64, "tie_word_embeddings": false})",
      "small_config");
}

std::shared_ptr<Llama> copy_of(const Llama& model) {
  std::map<std::string, Tensor> state;
  for (const auto& [name, t] : model.hf_state()) state.emplace(name, t.clone());
  return std::make_shared<Llama>(model.config(), std::move(state), "copy");
}

double relative_error(const Tensor& a, const Tensor& b) {
  return ops::sqrt(ops::sum(ops::square(ops::sub(a, b)))).item() /
         ops::sqrt(ops::sum(ops::square(b))).item();
}

TEST(LlamaQuant, LogitsFollowTheFloatModel) {
  Llama model(small_config(256, 512));
  model.eval();
  Tensor ids = Tensor::randint(0, 96, {2, 9});
  Tensor ref = model.forward(ids);
  double err[3];
  const QuantFormat formats[] = {QuantFormat::q8_0, QuantFormat::q4_0, QuantFormat::q4_k};
  for (int k = 0; k < 3; ++k) {
    auto q = copy_of(model);
    std::map<std::string, QuantFormat> layers = q->quantize(formats[k]);
    EXPECT_EQ(layers.size(), 15u);  // 7 per layer and lm_head
    for (const auto& [path, f] : layers) EXPECT_EQ(f, formats[k]) << path;
    EXPECT_EQ(q->linear_layers()[0].second->quantized_weight()->format, formats[k]);
    for (const auto& [name, p] : q->named_parameters())
      EXPECT_EQ(name.find("proj.weight"), std::string::npos) << name << " kept its float weight";
    err[k] = relative_error(q->forward(ids), ref);
  }
  EXPECT_LT(err[0], 0.03);  // of logits of a random model, whose signal is small
  EXPECT_LT(err[1], 0.3);
  EXPECT_LT(err[2], err[1]);  // q4_K's fitted scales and offsets beat q4_0
}

// Layers whose in_features is no multiple of 256 take q4_0 for q4_k.
TEST(LlamaQuant, Q4KFallsBackWhereRowsDoNotFit) {
  Llama model(small_config(64, 256));
  std::map<std::string, QuantFormat> layers = model.quantize(QuantFormat::q4_k);
  EXPECT_EQ(layers.at("model.layers.0.self_attn.q_proj"), QuantFormat::q4_0);
  EXPECT_EQ(layers.at("model.layers.0.mlp.down_proj"), QuantFormat::q4_k);
  EXPECT_TRUE(throws_with([&] { model.set_quantized_weight("model.layers.9.mlp.up_proj", {}); },
                          "no linear layer 'model.layers.9.mlp.up_proj'"));
}

TEST(LlamaQuant, SavedBlocksLoadUnchanged) {
  TempDir tmp("llama_quant");
  Llama model(small_config(256, 512));
  model.eval();
  model.quantize(QuantFormat::q4_k);
  models::save_quantized(model, tmp.str());
  EXPECT_TRUE(models::is_quantized_dir(tmp.str()));
  auto back = models::load_quantized(tmp.str());
  back->eval();
  auto a = model.linear_layers(), b = back->linear_layers();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const QuantizedWeight *qa = a[i].second->quantized_weight(),
                          *qb = b[i].second->quantized_weight();
    ASSERT_TRUE(qb != nullptr) << b[i].first;
    EXPECT_EQ(qa->format, qb->format);
    EXPECT_TRUE(all_close(qa->blocks.to(DType::f32), qb->blocks.to(DType::f32), 0, 0))
        << a[i].first;
  }
  Tensor ids = Tensor::randint(0, 96, {1, 7});
  EXPECT_TRUE(all_close(back->forward(ids), model.forward(ids), 0, 0));
}

// Quantizing each weight as it is read gives the blocks quantizing the whole model gives, the
// other tensors in the asked dtype; nf4 leaves a layer whose inputs are no multiple of 64.
TEST(LlamaQuant, QuantizingWhileReadingEqualsQuantizingAfter) {
  TempDir tmp("llama_quantizing");
  Llama(small_config(96, 256), DType::bf16).save_pretrained(tmp.str());
  for (const char* format : {"nf4", "q4_0"}) {
    auto whole = Llama::from_pretrained(tmp.str(), DType::f32);
    const std::map<std::string, QuantFormat> layers = whole->quantize(quant_from_name(format));
    auto streamed = models::load_quantizing(tmp.str(), format, DType::f32);
    EXPECT_EQ(streamed->weight_dtype(), DType::f32);
    auto a = whole->linear_layers(), b = streamed->linear_layers();
    ASSERT_EQ(a.size(), b.size());
    size_t quantized = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      const QuantizedWeight *qa = a[i].second->quantized_weight(),
                            *qb = b[i].second->quantized_weight();
      ASSERT_EQ(qa == nullptr, qb == nullptr) << format << " " << a[i].first;
      if (!qa) continue;
      ++quantized;
      EXPECT_EQ(qa->format, qb->format);
      EXPECT_TRUE(all_close(qa->blocks.to(DType::f32), qb->blocks.to(DType::f32), 0, 0))
          << format << " " << a[i].first;
    }
    EXPECT_EQ(quantized, layers.size()) << format;
    // nf4: only down_proj (256 inputs) of each layer; the others take 96, no multiple of 64
    EXPECT_EQ(quantized, std::string(format) == "nf4" ? 2u : 15u);
    whole->eval();
    streamed->eval();
    Tensor ids = Tensor::randint(0, 96, {1, 7});
    EXPECT_TRUE(all_close(streamed->forward(ids), whole->forward(ids), 0, 0)) << format;
  }
  EXPECT_EQ(models::load_quantizing(tmp.str(), "q8_0")->weight_dtype(), DType::bf16);
  EXPECT_TRUE(
      models::load_quantizing(tmp.str(), "")->linear_layers()[0].second->quantized_weight() ==
      nullptr);
}

}  // namespace
}  // namespace zenith::testing
