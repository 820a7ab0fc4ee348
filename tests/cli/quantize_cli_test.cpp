// `zenith quantize` and --dtype on perplexity/generate (src/cli/quantize.cpp, llm_common.cpp) on
// the trained example (examples/llm/fortunes-llama): perplexity on a held-out slice within the
// bounds of issue 40 (q8_0 within 0.5% of float32, 4-bit within 5%), a quantized directory that
// loads with its blocks unchanged, and the errors a user can act on.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "support/run_zenith.h"
#include "support/temp_dir.h"

namespace zenith::testing {
namespace {

const std::string kModel = std::string(ZENITH_SOURCE_DIR) + "/examples/llm/fortunes-llama";

// The first 3000 characters of the held-out fortunes, in `tmp`.
std::string heldout_slice(const TempDir& tmp) {
  std::ifstream in(std::string(ZENITH_SOURCE_DIR) + "/examples/llm/fortunes-heldout.txt");
  std::string text(3000, '\0');
  in.read(text.data(), std::streamsize(text.size()));
  std::ofstream(tmp / "slice.txt") << text;
  return tmp / "slice.txt";
}

double perplexity(const std::string& args) {
  CliResult r = run_zenith("perplexity --threads 1 --json " + args);
  EXPECT_EQ(r.code, 0) << args << "\n" << r.output;
  return r.code == 0 ? nlohmann::json::parse(r.output)["perplexity"].get<double>() : 0.0;
}

TEST(QuantizeCli, PerplexityWithinTheBounds) {
  TempDir tmp("quantize_cli");
  const std::string text = " --text-file " + heldout_slice(tmp);
  const double f32 = perplexity("--model " + kModel + text);
  for (const char* dtype : {"q8_0", "q4_0", "q4_k"}) {
    const double q = perplexity("--model " + kModel + " --dtype " + dtype + text);
    EXPECT_LT(std::fabs(q / f32 - 1), std::string(dtype) == "q8_0" ? 0.005 : 0.05)
        << dtype << ": " << q << " against float32's " << f32;
  }
}

TEST(QuantizeCli, AQuantizedDirectoryLoadsItsBlocks) {
  TempDir tmp("quantize_cli");
  CliResult r = run_zenith("quantize --model " + kModel + " --dtype q8_0 --out " + (tmp / "q8"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("quantized 28 linear layers"), std::string::npos) << r.output;
  const std::string text = " --text-file " + heldout_slice(tmp);
  EXPECT_EQ(perplexity("--model " + (tmp / "q8") + text),
            perplexity("--model " + kModel + " --dtype q8_0" + text));
  r = run_zenith("generate --model " + (tmp / "q8") + " --prompt 'Define: house' --chat " +
                 "--temperature 0 --max-new-tokens 8");
  EXPECT_EQ(r.code, 0) << r.output;
  r = run_zenith("perplexity --model " + (tmp / "q8") + " --dtype q4_0" + text);
  EXPECT_NE(r.output.find("is already quantized; drop --dtype q4_0"), std::string::npos)
      << r.output;
}

TEST(QuantizeCli, Errors) {
  CliResult r = run_zenith("perplexity --model " + kModel + " --ids 1,2,3 --dtype q5_1");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(
      r.output.find("unknown quantized format 'q5_1' (expected q8_0, q4_0, q4_k, nf4 or nf4_f32)"),
      std::string::npos)
      << r.output;
  r = run_zenith("quantize --model " + kModel + " --dtype q4_0 --out " + kModel);
  EXPECT_NE(r.output.find("--out must differ from --model"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace zenith::testing
