// `zenith tokenize` on the test tokenizers (tests/fixtures/text).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/run_zenith.h"

namespace zenith::testing {
namespace {

std::string model(const std::string& name) {
  return std::string(ZENITH_FIXTURE_DIR) + "/text/" + name;
}

TEST(TokenizeCli, Json) {
  CliResult r =
      run_zenith("tokenize --model " + model("llama3_bpe") + " --text 'Hello world' --json");
  ASSERT_EQ(r.code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  // The ids @huggingface/tokenizers gives (expected_hf.json).
  EXPECT_EQ(j["ids"], nlohmann::json({956, 39, 527, 78, 881}));
  EXPECT_EQ(j["tokens"], nlohmann::json({"<|begin_of_text|>", "H", "ell", "o", "Ġworld"}));
}

TEST(TokenizeCli, Plain) {
  CliResult r = run_zenith("tokenize --model " + model("sp_bpe") + " --text 'Hello world'");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output, "ids: 1 366 498 1747 832 2\ntokens: <s> ▁H ell o ▁world </s>\n");
  r = run_zenith("tokenize --model " + model("llama2_hf") +
                 " --text \"$(printf 'a\\nb')\" --no-special");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output, "ids: 262 13 1761\ntokens: ▁a <0x0A> b\n");
}

TEST(TokenizeCli, Errors) {
  CliResult r = run_zenith("tokenize --model /nonexistent --text hi");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.output, "error: [tokenizer] /nonexistent is not a directory\n");
  r = run_zenith("tokenize --text hi");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("--model is required"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace zenith::testing
