// The one JSON reply helper: status, headers, compact JSON, and never a throw on bytes that are
// not UTF-8 (nlohmann::json's own dump() throws on them).
#include "platform/http/reply.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

namespace zp = zenith::platform;
using nlohmann::json;

TEST(PlatformReply, JsonWithStatusAndNoCaching) {
  httplib::Response res;
  zp::reply_json(res, 201, {{"id", 7}, {"name", "café"}});
  EXPECT_EQ(res.status, 201);
  EXPECT_EQ(res.get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(res.get_header_value("Cache-Control"), "no-store");
  EXPECT_EQ(res.body, "{\"id\":7,\"name\":\"café\"}\n");
}

TEST(PlatformReply, ErrorsAreAnErrorObject) {
  httplib::Response res;
  zp::reply_error(res, 404, "[api] no job with id '9'");
  EXPECT_EQ(res.status, 404);
  EXPECT_EQ(json::parse(res.body), json({{"error", "[api] no job with id '9'"}}));
}

TEST(PlatformReply, InvalidUtf8BecomesReplacementCharacters) {
  const json body = {{"message", "caf\xA9 failed"}, {"lines", {"ok", "cut \xE2\x82"}}};
  EXPECT_THROW(body.dump(), json::type_error);  // what the servers used to call
  httplib::Response res;
  zp::reply_json(res, 200, body);
  EXPECT_EQ(res.status, 200);
  json back = json::parse(res.body);
  EXPECT_EQ(back["message"], "caf\xEF\xBF\xBD failed");
  EXPECT_EQ(back["lines"][1].get<std::string>().rfind("cut ", 0), 0u);
  EXPECT_EQ(zp::json_text(json("caf\xA9")), "\"caf\xEF\xBF\xBD\"");
  zp::reply_error(res, 500, "[api] bad \xFF byte");
  EXPECT_EQ(res.status, 500);
  EXPECT_EQ(json::parse(res.body)["error"], "[api] bad \xEF\xBF\xBD byte");
}
