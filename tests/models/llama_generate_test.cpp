// Sampling (HF's logits processors), generation's stopping rules, and perplexity.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "support/llama_fixtures.h"
#include "support/op_check.h"
#include "support/temp_dir.h"
#include "zenith/llama.h"

namespace zenith::testing {
namespace {

using models::GenerationConfig;
using models::TokenSampler;

GenerationConfig sampling(double temperature, int64_t top_k = 0, double top_p = 1.0,
                          double penalty = 1.0, uint64_t seed = 0) {
  GenerationConfig g;
  g.temperature = temperature;
  g.top_k = top_k;
  g.top_p = top_p;
  g.repetition_penalty = penalty;
  g.seed = seed;
  return g;
}

// How often each id is drawn in `n` draws from `logits`.
std::vector<int> histogram(const GenerationConfig& g, const std::vector<float>& logits, int n) {
  TokenSampler sampler(g);
  std::vector<int> counts(logits.size());
  for (int i = 0; i < n; ++i) {
    std::vector<float> row = logits;
    ++counts[size_t(sampler.next(row, {}))];
  }
  return counts;
}

std::vector<float> log_probs(const std::vector<double>& p) {
  std::vector<float> out;
  for (double x : p) out.push_back(float(std::log(x)));
  return out;
}

TEST(TokenSampler, GreedyTakesTheFirstMaximum) {
  TokenSampler sampler(sampling(0));
  std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(sampler.next(logits, {}), 1);
}

TEST(TokenSampler, RepetitionPenaltyAsHf) {
  // Seen tokens: positive scores divided by the penalty, negative ones multiplied, once each.
  TokenSampler sampler(sampling(0, 0, 1.0, 2.0));
  std::vector<float> logits = {3.0f, -1.0f, 2.0f, 0.5f};
  EXPECT_EQ(sampler.next(logits, {0, 1, 0, 0}), 2);
  EXPECT_EQ(logits, (std::vector<float>{1.5f, -2.0f, 2.0f, 0.5f}));
}

TEST(TokenSampler, SamplesTheSoftmax) {
  const std::vector<double> p = {0.5, 0.3, 0.15, 0.05};
  const int n = 20000;
  auto counts = histogram(sampling(1.0), log_probs(p), n);
  for (size_t i = 0; i < p.size(); ++i) {
    const double sigma = std::sqrt(n * p[i] * (1 - p[i]));
    EXPECT_NEAR(counts[i], n * p[i], 4 * sigma) << i;
  }
  // Temperature 0.5 squares the probabilities (then normalises).
  counts = histogram(sampling(0.5), log_probs(p), n);
  double z = 0;
  for (double x : p) z += x * x;
  for (size_t i = 0; i < p.size(); ++i) {
    const double q = p[i] * p[i] / z, sigma = std::sqrt(n * q * (1 - q));
    EXPECT_NEAR(counts[i], n * q, 4 * sigma) << i;
  }
}

TEST(TokenSampler, TopKAndTopPKeepTheLikelyTokens) {
  const std::vector<double> p = {0.5, 0.3, 0.15, 0.05};
  auto counts = histogram(sampling(1.0, 2), log_probs(p), 4000);
  EXPECT_EQ(counts[2] + counts[3], 0);
  EXPECT_NEAR(counts[0] / 4000.0, 0.5 / 0.8, 0.04);
  // top_p 0.6: ascending cumulative 0.05, 0.2, 0.5, 1.0; those <= 0.4 go: ids 3 and 2.
  counts = histogram(sampling(1.0, 0, 0.6), log_probs(p), 4000);
  EXPECT_EQ(counts[2] + counts[3], 0);
  EXPECT_GT(counts[1], 0);
  // top_p 0.45 keeps the top token only (0.5 >= 0.45).
  counts = histogram(sampling(1.0, 0, 0.45), log_probs(p), 500);
  EXPECT_EQ(counts[0], 500);
}

TEST(TokenSampler, SeedDecidesTheDraws) {
  const std::vector<float> logits(50, 0.0f);
  auto draws = [&](uint64_t seed) {
    TokenSampler s(sampling(1.0, 0, 1.0, 1.0, seed));
    std::vector<int64_t> out;
    for (int i = 0; i < 20; ++i) {
      std::vector<float> row = logits;
      out.push_back(s.next(row, {}));
    }
    return out;
  };
  EXPECT_EQ(draws(3), draws(3));
  EXPECT_NE(draws(3), draws(4));
}

TEST(TokenSampler, BadSettingsAreErrors) {
  EXPECT_TRUE(throws_with([] { TokenSampler(sampling(-1)); }, "temperature must be >= 0"));
  EXPECT_TRUE(throws_with([] { TokenSampler(sampling(1, -2)); }, "top_k must be >= 0"));
  EXPECT_TRUE(throws_with([] { TokenSampler(sampling(1, 0, 0.0)); }, "top_p must be in (0, 1]"));
  EXPECT_TRUE(
      throws_with([] { TokenSampler(sampling(1, 0, 1, 0)); }, "repetition_penalty must be > 0"));
}

TEST(Generate, StopsAtAnyEosId) {
  auto ref = llama_reference("llama3_tied");
  auto model = models::Llama::from_pretrained(llama_fixture("llama3_tied"));
  const std::vector<int64_t> greedy = ref.at("greedy.tokens").to_int_vector();
  GenerationConfig g = sampling(0);
  g.max_new_tokens = 20;
  g.eos_token_ids = {999, greedy[2]};
  auto out = models::generate(*model, ref.at("greedy.prompt").to_int_vector(), g);
  auto first = std::find(greedy.begin(), greedy.end(), greedy[2]);
  EXPECT_EQ(out.tokens, std::vector<int64_t>(greedy.begin(), first + 1));
  EXPECT_EQ(out.stop_reason, "eos");
  g.max_new_tokens = 0;
  EXPECT_TRUE(models::generate(*model, {1, 2}, g).tokens.empty());
  EXPECT_TRUE(throws_with([&] { models::generate(*model, {}, g); }, "the prompt is empty"));
}

TEST(Generate, SamplingIsReproducible) {
  auto model = models::Llama::from_pretrained(llama_fixture("llama_gqa"));
  GenerationConfig g = sampling(1.0, 20, 0.9, 1.3, 5);
  g.max_new_tokens = 10;
  auto a = models::generate(*model, {3, 4, 5}, g);
  auto b = models::generate(*model, {3, 4, 5}, g);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.tokens.size(), 10u);
  g.seed = 6;
  EXPECT_NE(models::generate(*model, {3, 4, 5}, g).tokens, a.tokens);
}

// Sum of -log p(ids[t] | ids[..t]) over t in [first, last], from one forward pass.
double nll_sum(models::Llama& model, const std::vector<int64_t>& ids, size_t begin, size_t end) {
  std::vector<int64_t> window(ids.begin() + long(begin), ids.begin() + long(end));
  NoGradGuard no_grad;
  Tensor logp =
      ops::log_softmax(model.forward(Tensor::from_vector(window, {1, int64_t(window.size())})), -1);
  double sum = 0;
  for (size_t t = 1; t < window.size(); ++t)
    sum -= logp.select(1, int64_t(t - 1)).select(1, window[t]).item();
  return sum;
}

TEST(Perplexity, MeanNllOverOverlappingWindows) {
  auto ref = llama_reference("llama_gqa");
  auto model = models::Llama::from_pretrained(llama_fixture("llama_gqa"));
  std::vector<int64_t> ids = ref.at("input_ids").to_int_vector();  // 2 x 12
  auto whole = models::perplexity(*model, ids);
  EXPECT_EQ(whole.tokens, 23);
  EXPECT_NEAR(whole.nll, nll_sum(*model, ids, 0, 24) / 23, 1e-5);
  EXPECT_NEAR(whole.perplexity, std::exp(whole.nll), 1e-9 * whole.perplexity);
  // Windows of 10 overlapping by one: [0, 10), [9, 19), [18, 24).
  auto windows = models::perplexity(*model, ids, 10);
  EXPECT_EQ(windows.tokens, 23);
  const double expected =
      (nll_sum(*model, ids, 0, 10) + nll_sum(*model, ids, 9, 19) + nll_sum(*model, ids, 18, 24)) /
      23;
  EXPECT_NEAR(windows.nll, expected, 1e-5);
  EXPECT_TRUE(throws_with([&] { models::perplexity(*model, {1}); }, "needs at least 2 tokens"));
}

}  // namespace
}  // namespace zenith::testing

namespace zenith::testing {
namespace {

// A model directory holding only generation_config.json (resolve_generation_config reads no more).
class GenerationDefaults : public ::testing::Test {
 protected:
  std::string with_file(const std::string& json) {
    std::ofstream(dir_ / "generation_config.json") << json;
    return dir_.str();
  }
  TempDir dir_{"generation_defaults"};
};

TEST_F(GenerationDefaults, GreedyWithoutAFileAsTransformers) {
  models::GenerationConfig c = models::resolve_generation_config(dir_.str());
  EXPECT_EQ(c.temperature, 0.0);  // greedy
  EXPECT_EQ(c.max_new_tokens, 128);
  EXPECT_EQ(c.repetition_penalty, 1.0);
  // A file without do_sample is greedy too (transformers' default do_sample=false).
  c = models::resolve_generation_config(with_file(R"({"temperature": 0.7, "top_p": 0.9})"));
  EXPECT_EQ(c.temperature, 0.0);
}

TEST_F(GenerationDefaults, TheFileDecidesWhereNothingIsGiven) {
  const std::string dir = with_file(
      R"({"do_sample": true, "temperature": 0.7, "top_p": 0.9, "max_new_tokens": 64,
          "repetition_penalty": 1.1, "eos_token_id": [2, 7]})");
  models::GenerationConfig c = models::resolve_generation_config(dir);
  EXPECT_DOUBLE_EQ(c.temperature, 0.7);
  EXPECT_EQ(c.top_k, 50);  // transformers' default where the file has none
  EXPECT_DOUBLE_EQ(c.top_p, 0.9);
  EXPECT_EQ(c.max_new_tokens, 64);
  EXPECT_DOUBLE_EQ(c.repetition_penalty, 1.1);
}

TEST_F(GenerationDefaults, GivenSettingsWin) {
  const std::string sampling = with_file(R"({"do_sample": true, "temperature": 0.7})");
  EXPECT_EQ(models::resolve_generation_config(sampling, {.temperature = 0.0}).temperature, 0.0);
  EXPECT_EQ(models::resolve_generation_config(sampling, {.do_sample = false}).temperature, 0.0);
  models::GenerationConfig c =
      models::resolve_generation_config(sampling, {.max_new_tokens = 5, .top_k = 3, .seed = 9});
  EXPECT_DOUBLE_EQ(c.temperature, 0.7);
  EXPECT_EQ(c.top_k, 3);
  EXPECT_EQ(c.max_new_tokens, 5);
  EXPECT_EQ(c.seed, 9u);
  // On a greedy model an explicit temperature or top-p samples; do_sample=false still wins.
  const std::string greedy = with_file("{}");
  EXPECT_DOUBLE_EQ(models::resolve_generation_config(greedy, {.temperature = 0.5}).temperature,
                   0.5);
  EXPECT_DOUBLE_EQ(models::resolve_generation_config(greedy, {.top_p = 0.8}).temperature, 1.0);
  EXPECT_EQ(models::resolve_generation_config(greedy, {.temperature = 0.5, .do_sample = false})
                .temperature,
            0.0);
}

TEST_F(GenerationDefaults, AWrongValueNamesTheFileAndKey) {
  const std::string dir = with_file(R"({"do_sample": true, "temperature": "hot"})");
  try {
    models::resolve_generation_config(dir);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("generation_config.json: temperature: expected a number, "
                                         "got \"hot\""),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace zenith::testing
