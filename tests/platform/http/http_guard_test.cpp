// The request limits' pure parts: which Host headers name this server (DNS rebinding) and how
// deep JSON nests before a recursive parser sees it.
#include "platform/http/http_guard.h"

#include <gtest/gtest.h>

#include "platform/http/reply.h"

namespace zp = zenith::platform;

TEST(PlatformHttpGuard, HostHeaderNamesThisServer) {
  const std::vector<std::string> names = {"train-box", "zenith.lab.example"};
  for (const char* ok :
       {"127.0.0.1", "127.0.0.1:7070", "localhost:7070", "LOCALHOST", "[::1]:7070", "10.1.2.3:80",
        "train-box", "Zenith.Lab.Example:7070", "zenith.lab.example."})
    EXPECT_TRUE(zp::host_allowed(ok, names)) << ok;
  for (const char* bad : {"evil.example", "evil.example:7070", "train-box.evil.example",
                          "localhost.evil.example", "[not-an-ip]:80", "", "[::1"})
    EXPECT_FALSE(zp::host_allowed(bad, names)) << bad;
}

TEST(PlatformHttpGuard, NestingDepthSkipsStrings) {
  EXPECT_EQ(zp::nesting_depth("{}"), 1u);
  EXPECT_EQ(zp::nesting_depth("{\"a\": [1, {\"b\": []}]}"), 4u);
  // Brackets inside strings (escaped quotes too) do not count in JSON; in YAML they do.
  EXPECT_EQ(zp::nesting_depth("{\"a\": \"[[[[\\\"[[[\"}"), 1u);
  EXPECT_EQ(zp::nesting_depth("a: \"[[[[\"", false), 4u);
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_EQ(zp::nesting_depth(deep), 100000u);
  EXPECT_GT(zp::nesting_depth(deep), zp::kMaxJsonDepth);
}

TEST(PlatformHttpGuard, DeepBodiesAreRefusedBeforeParsing) {
  httplib::Response res;
  EXPECT_FALSE(zp::parse_json_body(std::string(1000, '[') + std::string(1000, ']'), res, "api"));
  EXPECT_EQ(res.status, 400);
  EXPECT_NE(res.body.find("[api] the JSON body is nested deeper than 64 levels"), std::string::npos)
      << res.body;
  httplib::Response ok;
  auto parsed = zp::parse_json_body("", ok, "api", nlohmann::json::object());
  ASSERT_TRUE(parsed);
  EXPECT_TRUE(parsed->is_object());
  EXPECT_FALSE(zp::parse_json_body("{oops", ok, "api"));
  EXPECT_EQ(ok.status, 400);
}
