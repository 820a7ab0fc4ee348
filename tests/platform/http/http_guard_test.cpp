// The request limits' pure parts: which Host headers name this server (DNS rebinding) and how
// deep JSON nests before a recursive parser sees it; and the connection pool, which grows for a
// burst and shrinks after it.
#include "platform/http/http_guard.h"

#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "platform/http/reply.h"
#include "support/processes.h"

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

namespace {

// Threads in this process now.
int process_threads() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  return -1;
}

}  // namespace

// 32 connections at once, each held 200 ms by its handler, get a thread each; once the burst
// is over, threads idle for idle_thread_s end, down to the 4 the pool keeps.
TEST(PlatformHttpGuard, IdleConnectionThreadsEnd) {
  zp::HttpLimits limits;
  limits.max_threads = 64;
  limits.idle_thread_s = 0.3;
  zp::GuardedServer server(limits);
  std::atomic<int> inside{0}, most_inside{0};  // handlers running at once: threads in use
  server.Get("/slow", [&](const httplib::Request&, httplib::Response& res) {
    const int n = ++inside;
    for (int m = most_inside; n > m && !most_inside.compare_exchange_weak(m, n);) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    --inside;
    res.set_content("ok", "text/plain");
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread serving([&] { server.listen_after_bind(); });
  ASSERT_TRUE(zenith::testing::wait_for([&] { return server.is_running(); }, 10));
  const int before = process_threads();

  constexpr int kClients = 32;
  std::atomic<int> answered{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i)
    clients.emplace_back([&] {
      httplib::Client c("127.0.0.1", port);
      c.set_read_timeout(30);
      if (auto r = c.Get("/slow"); r && r->status == 200) ++answered;
    });
  for (auto& t : clients) t.join();
  EXPECT_EQ(answered, kClients);
  EXPECT_GE(most_inside, 8) << "the burst should have been served by many threads at once";

  const bool shrank =
      zenith::testing::wait_for([&] { return process_threads() <= before + 4; }, 10);
  EXPECT_TRUE(shrank) << "threads: " << before << " before the burst, " << process_threads()
                      << " now, " << most_inside << " connections served at once";
  // The pool still serves after shrinking.
  httplib::Client c("127.0.0.1", port);
  auto r = c.Get("/slow");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  server.stop();
  serving.join();
}
