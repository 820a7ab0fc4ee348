// The `zenith` front door (src/cli/main.cpp): --version, and a mistyped command.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "support/run_zenith.h"

namespace {

using zenith::testing::run_zenith;

// VERSION in CMakeLists.txt's project(zenith VERSION x.y.z ...).
std::string project_version() {
  std::ifstream in(std::string(ZENITH_SOURCE_DIR) + "/CMakeLists.txt");
  std::stringstream text;
  text << in.rdbuf();
  std::smatch m;
  const std::string s = text.str();
  return std::regex_search(s, m, std::regex(R"(project\(zenith VERSION ([0-9.]+))")) ? m[1].str()
                                                                                     : "";
}

TEST(Main, VersionIsTheProjectsWithTheCommitBuilt) {
  const std::string version = project_version();
  ASSERT_FALSE(version.empty());
  for (const char* args : {"--version", "version"}) {
    auto r = run_zenith(args);
    EXPECT_EQ(r.code, 0) << r.output;
    // Built from a git checkout: the commit (and -dirty with uncommitted changes) is known.
    EXPECT_TRUE(std::regex_match(
        r.output, std::regex("zenith " + version + R"( \(commit [0-9a-f]{12}(-dirty)?\)\n)")))
        << args << ": " << r.output;
  }
}

TEST(Main, AMistypedCommandSuggestsTheNearestOne) {
  auto r = run_zenith("trian --epochs 1");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.output, "zenith: unknown command 'trian' (did you mean 'train'?)\n");
  r = run_zenith("finetuen");
  EXPECT_EQ(r.output, "zenith: unknown command 'finetuen' (did you mean 'finetune'?)\n");
  r = run_zenith("frobnicate");  // near nothing: the list of commands
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("unknown command 'frobnicate'\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("commands:\n"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("did you mean"), std::string::npos) << r.output;
}

TEST(Main, UsageListsVersionAndEnv) {
  auto r = run_zenith("--help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.output.find("\n  env "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\n  version "), std::string::npos) << r.output;
}

}  // namespace
