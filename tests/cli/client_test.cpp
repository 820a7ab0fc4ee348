// The client commands' shared options (src/cli/client.cpp): each --help says where the server's
// URL and the token come from when not given.
#include <gtest/gtest.h>

#include "support/run_zenith.h"

namespace {

TEST(ClientHelp, NamesWhereTheServerAndTokenComeFrom) {
  for (const char* command :
       {"submit", "jobs", "job", "logs", "cancel", "services", "token", "smi", "deploy"}) {
    auto r = zenith::testing::run_zenith(std::string(command) + " --help");
    EXPECT_EQ(r.code, 0) << command << ": " << r.output;
    for (const char* source : {"--server", "$ZENITH_SERVER", "DATA/server.url", "--token",
                               "$ZENITH_TOKEN", "DATA/token", "$ZENITH_DATA", "~/.zenith"})
      EXPECT_NE(r.output.find(source), std::string::npos)
          << "`zenith " << command << " --help` does not name " << source << ":\n"
          << r.output;
  }
}

}  // namespace
