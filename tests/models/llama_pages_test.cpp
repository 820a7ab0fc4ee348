// A model's weights moved into one huge-page mapping (src/models/llama_pages.cpp): the same
// parameters with the same bytes, logits bit for bit, storages shared with a tensor outside the
// model left in place, quantized blocks moved too, and a weight replaced afterwards (quantize)
// released while the rest stays.
#include "models/llama_pages.h"

#include <gtest/gtest.h>

#include <cstring>

#include "zenith/autograd.h"
#include "zenith/llama.h"
#include "zenith/random.h"

namespace zenith::testing {
namespace {

using models::Llama;

models::LlamaConfig small_config() {
  return models::parse_llama_config(
      R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 128,
          "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
          "num_key_value_heads": 2, "vocab_size": 96, "max_position_embeddings": 64,
          "tie_word_embeddings": false})",
      "small_config");
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.contiguous().raw_data(), b.contiguous().raw_data(), a.nbytes()) == 0;
}

Tensor logits_of(Llama& model) {
  NoGradGuard no_grad;
  return model.forward(Tensor::from_vector(std::vector<int64_t>{3, 14, 15, 92, 65, 35}, {1, 6}));
}

TEST(LlamaPages, WeightsMoveIntoOneMappingAndLogitsStayBitForBit) {
  manual_seed(3);
  Llama model(small_config(), DType::f16);
  model.eval();
  const Tensor before = logits_of(model);
  std::vector<std::pair<std::string, Tensor>> params = model.named_parameters();
  std::vector<Tensor> copies;
  for (const auto& [name, p] : params) copies.push_back(p.clone());

  EXPECT_EQ(models::place_weights_in_huge_pages(model, int64_t(1) << 40), 0);  // below the bound
  const int64_t moved = models::place_weights_in_huge_pages(model, 0);
  int64_t bytes = 0;
  for (const auto& [name, p] : params) bytes += int64_t(p.nbytes());
  EXPECT_GE(moved, bytes);
  // The very parameters (the cells hold the same tensors), their bytes in one span.
  std::vector<std::pair<std::string, Tensor>> after = model.named_parameters();
  ASSERT_EQ(after.size(), params.size());
  const auto* lo = static_cast<const char*>(after.front().second.raw_data());
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_TRUE(after[i].second.is_same(params[i].second)) << after[i].first;
    EXPECT_TRUE(same_bytes(after[i].second, copies[i])) << after[i].first;
    const auto* p = static_cast<const char*>(after[i].second.raw_data());
    EXPECT_GE(p, lo) << after[i].first;
    EXPECT_LE(p + after[i].second.nbytes(), lo + moved) << after[i].first;
  }
  EXPECT_TRUE(same_bytes(logits_of(model), before));
}

TEST(LlamaPages, AStorageSharedOutsideTheModelStays) {
  manual_seed(4);
  Llama model(small_config());
  model.eval();
  const Tensor embedding = model.named_parameters().front().second;
  const Tensor outside = embedding.detach();  // a second tensor on the same storage
  const void* where = embedding.raw_data();
  const Tensor last = model.named_parameters().back().second;
  const void* last_was = last.raw_data();
  EXPECT_GT(models::place_weights_in_huge_pages(model, 0), 0);
  EXPECT_EQ(embedding.raw_data(), where);
  EXPECT_EQ(outside.raw_data(), where);
  EXPECT_NE(last.raw_data(), last_was);  // the others moved
}

TEST(LlamaPages, QuantizedBlocksMoveAndReplacedWeightsAreReleased) {
  manual_seed(5);
  Llama model(small_config());
  model.eval();
  manual_seed(5);
  Llama reference(small_config());
  reference.eval();
  // Moved in float, then quantized: the float weights are released from the mapping.
  EXPECT_GT(models::place_weights_in_huge_pages(model, 0), 0);
  model.quantize(QuantFormat::q8_0);
  reference.quantize(QuantFormat::q8_0);
  EXPECT_TRUE(same_bytes(logits_of(model), logits_of(reference)));
  // The blocks move too and still give the same logits.
  EXPECT_GT(models::place_weights_in_huge_pages(model, 0), 0);
  const auto layers = model.linear_layers(), reference_layers = reference.linear_layers();
  for (size_t i = 0; i < layers.size(); ++i) {
    const QuantizedWeight* q = layers[i].second->quantized_weight();
    ASSERT_NE(q, nullptr) << layers[i].first;
    EXPECT_TRUE(same_bytes(q->blocks, reference_layers[i].second->quantized_weight()->blocks))
        << layers[i].first;
  }
  EXPECT_TRUE(same_bytes(logits_of(model), logits_of(reference)));
}

}  // namespace
}  // namespace zenith::testing
