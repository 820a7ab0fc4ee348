// The fixture of the OpenAI service's tests over real HTTPS on loopback (openai_server_test.cpp,
// openai_routes_test.cpp): the small examples/llm/fortunes-llama behind an LlmServer with its
// token store, clients, the error envelope's checks and a raw server-sent-events reader.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "platform/deployments/deployment_store.h"
#include "serve/llm/http_server.h"
#include "support/temp_dir.h"

namespace zenith::serve::llm::openai_test {

using nlohmann::json;
using zenith::testing::TempDir;

const std::string kModel = ZENITH_SOURCE_DIR "/examples/llm/fortunes-llama";

class OpenAiServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("openai");
    platform::DeploymentStore store(db());
    token_ = store.create_token("fortunes").second;
    other_token_ = store.create_token("other").second;
    admin_token_ = store.create_token("", 0, "admin").second;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string db() { return dir_->str() + "/zenith.db"; }
  static LlmServeOptions options() {
    LlmServeOptions o;
    o.name = "fortunes";
    o.port = 0;
    o.tls_dir = dir_->str() + "/tls";
    o.token_db = db();
    o.engine.kv_cache_bytes = 16 << 20;
    return o;
  }

  void start(LlmServeOptions o = options()) {
    server_ = std::make_unique<LlmServer>(kModel, o);
    port_ = server_->bind();
    thread_ = std::thread([this] { server_->serve(); });
  }
  void TearDown() override {
    if (!server_) return;
    server_->stop();
    thread_.join();
    server_.reset();
  }
  std::unique_ptr<httplib::Client> client(const std::string& token) const {
    auto c = std::make_unique<httplib::Client>(server_->url());
    c->enable_server_certificate_verification(true);
    c->set_ca_cert_path(server_->cert_path().c_str());
    c->set_read_timeout(30);
    if (!token.empty()) c->set_bearer_token_auth(token);
    return c;
  }
  httplib::Result post(const std::string& path, const json& body,
                       const std::string& token = token_) const {
    return client(token)->Post(path.c_str(), body.dump(), "application/json");
  }
  static json chat(const std::string& text, json extra = json::object()) {
    json body = {{"model", "fortunes"},
                 {"messages", {{{"role", "user"}, {"content", text}}}},
                 {"max_tokens", 8},
                 {"temperature", 0}};
    body.update(extra);
    return body;
  }

  inline static TempDir* dir_ = nullptr;
  inline static std::string token_, other_token_, admin_token_;
  std::unique_ptr<LlmServer> server_;
  std::thread thread_;
  int port_ = 0;
};

// A request submitted straight to the engine that holds the engine thread in its first
// callback until released: the engine is busy, and what comes next waits.
class EngineHold {
 public:
  explicit EngineHold(Engine& engine) {
    SamplingParams p;
    p.max_tokens = 4;
    p.temperature = 0;
    auto held = std::make_shared<std::atomic<bool>>(false);
    engine.submit({1, 450}, p, [this, held](const Event&) {
      if (held->exchange(true)) return;
      holding_.set_value();
      released_.wait();
    });
    holding_.get_future().wait();
  }
  ~EngineHold() { release(); }
  void release() {
    if (!done_) release_.set_value();
    done_ = true;
  }

 private:
  std::promise<void> release_, holding_;
  std::shared_future<void> released_ = release_.get_future().share();
  bool done_ = false;
};

// An error answer: OpenAI's envelope, a request id, and no retry for a 4xx a retry cannot fix.
inline void expect_error(const httplib::Result& r, int status, const std::string& param) {
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, status) << r->body;
  const json body = json::parse(r->body);
  ASSERT_TRUE(body["error"].is_object()) << r->body;
  for (const char* key : {"message", "type", "param", "code"})
    EXPECT_TRUE(body["error"].contains(key)) << key << " in " << r->body;
  EXPECT_EQ(body["error"]["param"], param.empty() ? json() : json(param)) << r->body;
  EXPECT_FALSE(r->get_header_value("x-request-id").empty());
  if (status < 500 && status != 429) {
    EXPECT_EQ(r->get_header_value("x-should-retry"), "false");
  }
}

// The events of a raw SSE body: each "data: " payload; comments (": ping") counted apart.
struct Sse {
  std::vector<std::string> data;
  int comments = 0;
  bool well_framed = true;
};
inline Sse parse_sse(const std::string& body) {
  Sse out;
  size_t at = 0;
  while (at < body.size()) {
    const size_t end = body.find("\n\n", at);
    if (end == std::string::npos) {
      out.well_framed = false;
      break;
    }
    const std::string event = body.substr(at, end - at);
    if (event.rfind(": ", 0) == 0)
      ++out.comments;
    else if (event.rfind("data: ", 0) == 0 && event.find('\n') == std::string::npos)
      out.data.push_back(event.substr(6));
    else
      out.well_framed = false;
    at = end + 2;
  }
  return out;
}

}  // namespace zenith::serve::llm::openai_test
