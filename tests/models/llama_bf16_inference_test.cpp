// bfloat16 inference on the fortunes model (a bf16 file): its weights kept in bfloat16 and
// multiplied with float32 accumulation (what `zenith generate --dtype bf16` loads), against the
// same weights widened to float32; and the linear layers in bfloat16 arithmetic (Llama's low
// precision, oneDNN's bf16 kernels where the CPU has AVX512_BF16, as `--dtype bf16` sets it
// there) within perplexity limits, decode rows (<= 8) staying on the float32-arithmetic GEMV.
#include <gtest/gtest.h>

#include <iostream>

#include "zenith/cpu_features.h"
#include "zenith/llama.h"

namespace zenith::testing {
namespace {

const std::string kModel = std::string(ZENITH_SOURCE_DIR) + "/examples/llm/fortunes-llama";

// Text the model writes itself (sampled at temperature 1 from bos): ids whose perplexity means
// something without a tokenizer.
std::vector<int64_t> sampled_ids(models::Llama& model, int64_t n) {
  model.eval();
  auto out = models::generate(model, {1}, {.max_new_tokens = n, .temperature = 1.0, .seed = 7});
  std::vector<int64_t> ids = {1};
  ids.insert(ids.end(), out.tokens.begin(), out.tokens.end());
  return ids;
}

struct Outcome {
  std::vector<int64_t> tokens;
  double nll;
};

Outcome run(models::Llama& model, const std::vector<int64_t>& ids) {
  model.eval();
  const std::vector<int64_t> prompt(ids.begin(), ids.begin() + 6);
  auto out = models::generate(model, prompt, {.max_new_tokens = 32, .temperature = 0});
  return {out.tokens, models::perplexity(model, ids, 256).nll};
}

TEST(LlamaBf16Inference, Bf16WeightsDecodeAsFloat32) {
  auto f32 = models::Llama::from_pretrained(kModel, DType::f32);
  const std::vector<int64_t> ids = sampled_ids(*f32, 240);
  auto bf16 = models::Llama::from_pretrained(kModel, DType::bf16);
  ASSERT_EQ(bf16->weight_dtype(), DType::bf16);
  const Outcome a = run(*f32, ids), b = run(*bf16, ids);
  EXPECT_EQ(b.tokens, a.tokens);
  EXPECT_NEAR(b.nll, a.nll, 1e-5 * a.nll);  // the same products, summed in another order

  // Linear layers in bfloat16 arithmetic (activations rounded to bf16, float32 accumulation):
  // perplexity within 0.5% (q8_0's limit); greedy tokens may part where two logits are close.
  // Up to 8 rows (decode) keep float32 arithmetic on the bf16 weights (the GEMV): bit for bit.
  const Tensor few =
      Tensor::from_vector(std::vector<int64_t>(ids.begin(), ids.begin() + 8), {1, 8});
  const std::vector<double> before = bf16->forward(few).to_double_vector();
  bf16->set_low_precision(DType::bf16);
  EXPECT_EQ(bf16->forward(few).to_double_vector(), before);
  const Outcome c = run(*bf16, ids);
  EXPECT_NEAR(c.nll, a.nll, 0.005 * a.nll) << (bf16_arithmetic() ? "bf16" : "float32");
  size_t same = 0;
  while (same < c.tokens.size() && c.tokens[same] == a.tokens[same]) ++same;
  EXPECT_GE(same, 8u) << "bf16 arithmetic parts from float32's greedy tokens at " << same;
  std::cout << "bf16 arithmetic " << bf16_arithmetic() << ": nll " << c.nll << " vs " << a.nll
            << ", greedy tokens equal for " << same << " of 32\n";
}

}  // namespace
}  // namespace zenith::testing
