// `zenith serve` and `zenith deploy --kv-cache-dtype`: a value other than auto, f32, bf16 or f16
// is refused before anything starts, naming the flag and the values it takes.
#include <gtest/gtest.h>

#include "support/run_zenith.h"

namespace zenith::testing {
namespace {

TEST(KvCacheDtypeCli, ABadValueNamesTheFlag) {
  for (const char* command : {"serve model-dir", "deploy --model model-dir --name chat"}) {
    const CliResult r = run_zenith(std::string(command) + " --kv-cache-dtype q8_0");
    EXPECT_NE(r.code, 0) << command;
    EXPECT_NE(r.output.find("--kv-cache-dtype: q8_0 not in {auto,f32,bf16,f16}"), std::string::npos)
        << r.output;
  }
}

}  // namespace
}  // namespace zenith::testing
