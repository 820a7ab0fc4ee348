// The rendezvous stores on their own: set/get, prefixes, waiting, timeouts.
#include "distributed/store.h"

#include <gtest/gtest.h>

#include <thread>

#include "rank_runner.h"
#include "support/temp_dir.h"

namespace zenith {
namespace {

using test::contains;
using namespace std::chrono_literals;
using zenith::testing::TempDir;

std::vector<char> bytes(const std::string& s) { return std::vector<char>(s.begin(), s.end()); }

// Two handles on one backend, as two ranks would have.
void exercise(distributed::Store& a, distributed::Store& b) {
  a.set("k1", bytes("hello"));
  EXPECT_EQ(b.get("k1"), bytes("hello"));
  a.set("k1", bytes("again"));  // overwriting is allowed (reruns)
  EXPECT_EQ(b.get("k1"), bytes("again"));
  std::string binary("a\0b\xff", 4);
  b.set("bin", bytes(binary));
  EXPECT_EQ(a.get("bin"), bytes(binary));
  // Children see only their own keys.
  auto ca = a.child("g1");
  auto cb = b.child("g1");
  ca->set("k1", bytes("child"));
  EXPECT_EQ(cb->get("k1"), bytes("child"));
  EXPECT_EQ(b.get("k1"), bytes("again"));
  // get() blocks until another rank sets the key.
  std::thread setter([&] {
    std::this_thread::sleep_for(50ms);
    a.set("late", bytes("x"));
  });
  EXPECT_EQ(b.get("late"), bytes("x"));
  setter.join();
  // A key nobody sets: a clear error after the timeout.
  const auto start = std::chrono::steady_clock::now();
  try {
    b.wait({"never"}, 300ms);
    ADD_FAILURE() << "wait for a missing key returned";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(),
                         "[communication] rendezvous timed out after 0.3 s waiting for "
                         "key(s) "))
        << e.what();
    EXPECT_TRUE(contains(e.what(), "/never in " + b.describe())) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
}

TEST(DistStore, File) {
  TempDir dir("distributed");
  auto a = distributed::make_store("file://" + dir.str() + "/s", "p", false, 5s);
  auto b = distributed::make_store("file://" + dir.str() + "/s", "p", false, 5s);
  exercise(*a, *b);
  EXPECT_THROW(distributed::make_store("file://relative/path", "p", false, 1s), Error);
}

TEST(DistStore, Tcp) {
  const int port = test::free_port();
  const std::string url = "tcp://127.0.0.1:" + std::to_string(port);
  auto server = distributed::make_store(url, "p", true, 5s);
  auto client = distributed::make_store(url, "p", false, 5s);
  exercise(*server, *client);
  // A second server on the same port is refused with a clear message.
  try {
    distributed::make_store(url, "p", true, 1s);
    ADD_FAILURE() << "two servers on one port";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "rank 0 cannot listen on 127.0.0.1:")) << e.what();
  }
}

TEST(DistStore, TcpClientWaitsForTheServer) {
  const int port = test::free_port();
  const std::string url = "tcp://127.0.0.1:" + std::to_string(port);
  std::unique_ptr<distributed::Store> server;
  std::thread late([&] {
    std::this_thread::sleep_for(100ms);
    server = distributed::make_store(url, "p", true, 5s);
  });
  auto client = distributed::make_store(url, "p", false, 5s);  // retries until rank 0 listens
  late.join();
  client->set("k", bytes("v"));
  EXPECT_EQ(server->get("k"), bytes("v"));
}

TEST(DistStore, Redis) {
  if (!test::RedisServer::installed()) GTEST_SKIP() << "redis-server is not installed";
  test::RedisServer redis;
  auto a = distributed::make_store(redis.url(), "p", false, 5s);
  auto b = distributed::make_store(redis.url(), "p", false, 5s);
  exercise(*a, *b);
}

TEST(DistStore, BadUrls) {
  EXPECT_THROW(distributed::make_store("ftp://x", "p", false, 1s), Error);
  EXPECT_THROW(distributed::make_store("tcp://nohostport", "p", false, 1s), Error);
  EXPECT_THROW(distributed::make_store("redis://127.0.0.1:99999", "p", false, 1s), Error);
  const int closed = test::free_port();
  try {
    distributed::make_store("redis://127.0.0.1:" + std::to_string(closed), "p", false, 300ms);
    ADD_FAILURE() << "connected to a closed port";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "[communication] redis store: cannot connect to 127.0.0.1:"))
        << e.what();
  }
}

}  // namespace
}  // namespace zenith
