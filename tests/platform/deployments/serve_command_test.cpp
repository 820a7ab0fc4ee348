// A deployed service's `zenith serve` command line: the fixed part, then each option of its
// deploy request as one `--key=value` argument (LLM options included), unknown keys ignored.
#include "platform/deployments/serve_command.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace zp = zenith::platform;

namespace {

bool has(const std::vector<std::string>& args, const std::string& arg) {
  return std::find(args.begin(), args.end(), arg) != args.end();
}

}  // namespace

TEST(ServeCommand, PassesEveryLlmOptionAsOneArgument) {
  zp::DeploymentRecord r;
  r.name = "chat";
  r.port = 0;
  r.replicas = 1;
  r.options = R"({"max-batched-tokens": 32, "max-step-cost": 3.5, "kv-cache-memory": "64Mi",
                  "threads": 1, "chat-template": "chatml", "dtype": "q8_0", "max-queue": 8,
                  "host": "-x", "kv-cache-dtype": "bf16", "unknown": "no"})";
  zp::ModelVersion m;
  m.package_dir = "/d/models/chat/v2";
  m.version = 2;
  const auto args = zp::serve_command("/bin/zenith", "/d", r, m, "/d/services/chat/port");
  ASSERT_GE(args.size(), 3u);
  EXPECT_EQ(args[0], "/bin/zenith");
  EXPECT_EQ(args[1], "serve");
  EXPECT_EQ(args[2], "/d/models/chat/v2");
  EXPECT_TRUE(has(args, "--managed"));
  for (const char* a : {"--max-batched-tokens=32", "--max-step-cost=3.5", "--kv-cache-memory=64Mi",
                        "--threads=1", "--chat-template=chatml", "--dtype=q8_0", "--max-queue=8",
                        "--host=-x", "--kv-cache-dtype=bf16"})
    EXPECT_TRUE(has(args, a)) << a;
  for (const auto& a : args) EXPECT_EQ(a.find("unknown"), std::string::npos) << a;
  EXPECT_FALSE(zp::serves_insecure_http(r));
  r.options = R"({"insecure-http": true})";
  EXPECT_TRUE(has(zp::serve_command("/bin/zenith", "/d", r, m, "p"), "--insecure-http"));
  EXPECT_TRUE(zp::serves_insecure_http(r));
}
