// The OpenMP wait policy `zenith` runs with (src/cli/omp_defaults.cpp). libgomp reads it when it
// is loaded, so the test asks libgomp itself: OMP_DISPLAY_ENV=verbose prints the settings it
// took, once per program image (twice when zenith re-executes itself with its default).
#include <gtest/gtest.h>

#include <regex>

#include "support/run_zenith.h"

namespace {

// The values of `setting` in each of libgomp's displays, in order ("OMP_WAIT_POLICY = 'X'").
std::vector<std::string> shown(const std::string& output, const std::string& setting) {
  std::vector<std::string> values;
  const std::regex line("  " + setting + " = '([^']*)'");
  for (std::sregex_iterator it(output.begin(), output.end(), line), end; it != end; ++it)
    values.push_back((*it)[1]);
  return values;
}

zenith::testing::CliResult run_with(const std::string& env,
                                    const std::string& args = "train --help") {
  return zenith::testing::run_shell(
      "env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT OMP_DISPLAY_ENV=verbose " + env + " " +
      ZENITH_BINARY + " " + args);
}

TEST(OmpDefaults, IdleThreadsSleepByDefault) {
  auto r = run_with("");
  ASSERT_EQ(r.code, 0) << r.output;
  // libgomp's own default first (300000 spins), then the re-executed zenith's.
  const auto spins = shown(r.output, "GOMP_SPINCOUNT");
  ASSERT_EQ(spins.size(), 2u) << r.output;
  EXPECT_EQ(spins[0], "300000");
  EXPECT_EQ(spins[1], "0") << r.output;
  EXPECT_EQ(shown(r.output, "OMP_WAIT_POLICY").back(), "PASSIVE");
  EXPECT_NE(r.output.find("Usage: zenith train"), std::string::npos) << r.output;  // and it ran
}

TEST(OmpDefaults, CommandsThatRunNoKernelsStartOnce) {
  auto r = run_with("", "version");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(shown(r.output, "GOMP_SPINCOUNT"), std::vector<std::string>{"300000"}) << r.output;
}

TEST(OmpDefaults, TheUsersSettingWins) {
  auto r = run_with("OMP_WAIT_POLICY=ACTIVE");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(shown(r.output, "OMP_WAIT_POLICY"), std::vector<std::string>{"ACTIVE"}) << r.output;
  r = run_with("GOMP_SPINCOUNT=1234");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(shown(r.output, "GOMP_SPINCOUNT"), std::vector<std::string>{"1234"}) << r.output;
}

}  // namespace
