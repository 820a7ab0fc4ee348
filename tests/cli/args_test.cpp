// Every command's argument parsing (src/cli/args.cpp, through `zenith` as a user runs it): a
// mistyped option or subcommand gets a "did you mean", required options say so in --help.
#include <gtest/gtest.h>

#include "support/run_zenith.h"

namespace {

using zenith::testing::run_zenith;

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(Args, AMistypedOptionSuggestsTheNearestOne) {
  auto r = run_zenith("train --epoch 3");
  EXPECT_EQ(r.code, 109) << r.output;  // CLI11's code for arguments it could not place
  EXPECT_TRUE(has(r.output, "zenith train: unknown option '--epoch' (did you mean '--epochs'?)"))
      << r.output;
  EXPECT_FALSE(has(r.output, "not expected")) << "the guess replaces CLI11's line\n" << r.output;
  r = run_zenith("convert --from llama2c --chekpoint x.bin --out /nonexistent");
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(has(r.output, "unknown option '--chekpoint' (did you mean '--checkpoint'?)"))
      << r.output;
  EXPECT_TRUE(has(r.output, "Run `zenith convert --help` for the options.")) << r.output;
  r = run_zenith("convert --from llama2c --checkpoint=x.bin --out=/nonexistent --dtpye=bf16");
  EXPECT_TRUE(has(r.output, "unknown option '--dtpye' (did you mean '--dtype'?)")) << r.output;
  r = run_zenith("train --batchsize 3");
  EXPECT_TRUE(has(r.output, "unknown option '--batchsize' (did you mean '--batch-size'?)"))
      << r.output;
}

TEST(Args, AnOptionNearNothingGetsNoGuess) {
  auto r = run_zenith("convert --from llama2c --checkpoint x.bin --out /nonexistent --zzzzzzzz");
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(has(r.output, "--zzzzzzzz")) << r.output;
  EXPECT_FALSE(has(r.output, "did you mean")) << r.output;
}

TEST(Args, AMistypedSubcommandSuggestsTheNearestOne) {
  auto r = run_zenith("token craete --service x --data /nonexistent");
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(has(r.output, "unknown subcommand 'craete' (did you mean 'create'?)")) << r.output;
}

TEST(Args, RequiredOptionsAreMarkedInHelp) {
  auto r = run_zenith("convert --help");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "--from TEXT (required)")) << r.output;
  EXPECT_TRUE(has(r.output, "--checkpoint TEXT (required)")) << r.output;
  const auto dtype = r.output.find("--dtype");
  ASSERT_NE(dtype, std::string::npos) << r.output;
  EXPECT_FALSE(has(r.output.substr(dtype, r.output.find('\n', dtype) - dtype), "required"));
  EXPECT_FALSE(has(r.output, "REQUIRED")) << r.output;
  EXPECT_FALSE(has(r.output, "did you mean")) << r.output;
}

// finetune's --model, --data and --out may come from a --config YAML instead, so CLI11 cannot
// enforce them; their help says they are required all the same.
TEST(Args, FinetunesRequiredSettingsSaySoInHelp) {
  const auto r = run_zenith("finetune --help");
  EXPECT_EQ(r.code, 0) << r.output;
  for (const char* flag : {"--model TEXT", "--data TEXT", "--out TEXT"}) {
    const auto at = r.output.find(flag);
    ASSERT_NE(at, std::string::npos) << flag << "\n" << r.output;
    EXPECT_TRUE(has(r.output.substr(at, r.output.find('\n', at) - at), "(required")) << flag << "\n"
                                                                                     << r.output;
  }
}

}  // namespace
