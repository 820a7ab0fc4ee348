// The token gate both services share (src/serve/route_auth.h): a missing header, another
// scheme, another service's token, the platform's own token on /metrics only.
#include "serve/route_auth.h"

#include <gtest/gtest.h>

#include "platform/deployments/deployment_store.h"
#include "support/temp_dir.h"

namespace zenith::serve {
namespace {

httplib::Request request(const std::string& path, const std::string& authorization = "") {
  httplib::Request req;
  req.path = path;
  if (!authorization.empty()) req.set_header("Authorization", authorization);
  return req;
}

TEST(RouteAuth, ServiceTokensPassAndOthersAreRefusedByName) {
  testing::TempDir dir("route_auth");
  const std::string db = dir.str() + "/zenith.db";
  std::string mine, other;
  {
    platform::DeploymentStore store(db);
    mine = store.create_token("fortunes").second;
    other = store.create_token("other").second;
  }
  platform::TokenVerifier tokens(db, "fortunes");
  const std::string platform_token = "zt_platform";
  auto gate = [&](const httplib::Request& req) {
    return authorize_service_request(req, tokens, "fortunes", platform_token);
  };
  EXPECT_FALSE(gate(request("/v1/models", "Bearer " + mine)));
  const auto missing = gate(request("/v1/models"));
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 401);
  EXPECT_NE(missing->message.find("zenith token create --service fortunes"), std::string::npos);
  const auto forbidden = gate(request("/v1/models", "Bearer " + other));
  ASSERT_TRUE(forbidden);
  EXPECT_EQ(forbidden->status, 403);
  EXPECT_NE(forbidden->message.find("'fortunes'"), std::string::npos);
  EXPECT_EQ(gate(request("/v1/models", "Basic " + mine))->status, 401);  // not a bearer token
  EXPECT_EQ(gate(request("/v1/models", "Bearer zt_nonsense"))->status, 401);
  // The platform's own token opens /metrics, nothing else.
  EXPECT_FALSE(gate(request("/metrics", "Bearer " + platform_token)));
  EXPECT_EQ(gate(request("/v1/models", "Bearer " + platform_token))->status, 401);
  EXPECT_FALSE(is_platform_token("", ""));
  EXPECT_EQ(bearer_secret(request("/x", "Bearer abc")), "abc");
  EXPECT_EQ(bearer_secret(request("/x", "Token abc")), "");
  EXPECT_FALSE(bearer_secret(request("/x")));
}

}  // namespace
}  // namespace zenith::serve
