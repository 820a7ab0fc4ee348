// KV-cache decoding on a tiny LLaMA rewritten for tensor parallelism (degree 2, tied and untied
// output layer): the tokens, greedy and sampled, and the stop reasons equal one process's
// models::generate; sequence parallelism is refused by name. Ranks are forked processes.
#include <gtest/gtest.h>

#include "distributed/parallelize_llama_generate.h"
#include "rank_runner.h"
#include "support/temp_dir.h"
#include "tiny_llama.h"
#include "zenith/zenith.h"

namespace zenith {
namespace {

namespace comm = communication;
using test::expect;
using test::tiny_llama_config;
using zenith::testing::TempDir;

// The model's context: a 44-token prompt leaves room for 4 new tokens (the "context" stop).
constexpr int64_t kContext = 48;

std::shared_ptr<models::Llama> copy_of(const models::Llama& ref) {
  std::map<std::string, Tensor> weights;
  for (auto& [name, t] : ref.hf_state()) weights.emplace(name, t.clone());
  return std::make_shared<models::Llama>(ref.config(), std::move(weights), "reference");
}

void in_ranks(const std::function<void(int)>& fn) {
  TempDir dir("tensor_parallel_generate");
  const std::string store = "file://" + dir.str();
  auto results = test::run_ranks(2, [&](int rank) {
    context::set_num_threads(1);
    comm::init(test::rank_options(rank, 2, store));
    fn(rank);
    comm::release();
  });
  for (const auto& r : results) EXPECT_TRUE(r.ok()) << test::describe(results);
}

std::string str(const std::vector<int64_t>& ids) {
  std::string out;
  for (int64_t id : ids) out += std::to_string(id) + " ";
  return out;
}

TEST(TensorParallelGenerate, TokensEqualOneProcess) {
  for (bool tied : {false, true}) {
    in_ranks([tied](int rank) {
      manual_seed(31);
      models::Llama ref(tiny_llama_config(tied, kContext));
      auto model = copy_of(ref);
      auto plan = distributed::parallelize_llama(*model, {});
      const std::vector<int64_t> prompt = {5, 17, 42, 3, 9, 28};
      std::vector<int64_t> streamed;
      const auto on_token = [&](int64_t id) { streamed.push_back(id); };
      // Greedy, sampled (the same seed on every rank draws the same), with a repetition penalty.
      std::vector<models::GenerationConfig> settings = {
          {.max_new_tokens = 24, .temperature = 0},
          {.max_new_tokens = 24, .temperature = 0.8, .top_k = 20, .top_p = 0.9, .seed = 7},
          {.max_new_tokens = 24, .temperature = 0, .repetition_penalty = 1.3},
      };
      for (const auto& config : settings) {
        streamed.clear();
        const auto want = models::generate(ref, prompt, config);
        const auto got =
            distributed::tensor_parallel_generate(*model, plan, prompt, config, on_token);
        expect(got.tokens == want.tokens, "rank ", rank, " tied ", tied, ": ", str(got.tokens),
               "vs one process ", str(want.tokens));
        expect(got.stop_reason == want.stop_reason && streamed == got.tokens, "stop ",
               got.stop_reason, " vs ", want.stop_reason);
      }
      std::vector<int64_t> long_prompt(44, 7);
      const auto want =
          models::generate(ref, long_prompt, {.max_new_tokens = 10, .temperature = 0});
      const auto got = distributed::tensor_parallel_generate(
          *model, plan, long_prompt, {.max_new_tokens = 10, .temperature = 0});
      expect(got.tokens == want.tokens && got.stop_reason == "context" && got.tokens.size() == 4,
             "context: ", str(got.tokens), got.stop_reason, " vs ", str(want.tokens));
    });
  }
}

TEST(TensorParallelGenerate, SequenceParallelIsRefused) {
  in_ranks([](int) {
    manual_seed(32);
    auto model = std::make_shared<models::Llama>(tiny_llama_config(false, kContext));
    auto plan = distributed::parallelize_llama(*model, {.sequence_parallel = true});
    try {
      distributed::tensor_parallel_generate(*model, plan, {1, 2, 3}, {.max_new_tokens = 2});
      expect(false, "sequence parallel decoding was not refused");
    } catch (const Error& e) {
      expect(std::string(e.what()).find("sequence parallelism") != std::string::npos, e.what());
    }
  });
}

}  // namespace
}  // namespace zenith
