// init() from the environment the platform provides: the MindSpore rank table and variables,
// torchrun's variables, ZENITH_* settings; and the rank-table parser on its own.
#include "distributed/environment.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <optional>

#include "rank_runner.h"
#include "support/temp_dir.h"

namespace zenith {
namespace {

namespace comm = communication;
using test::contains;
using test::expect;
using zenith::testing::TempDir;

const char* const kVars[] = {"RANK_ID",
                             "RANK_SIZE",
                             "RANK_TABLE_FILE",
                             "RANK",
                             "WORLD_SIZE",
                             "MASTER_ADDR",
                             "MASTER_PORT",
                             "ZENITH_STORE",
                             "ZENITH_STORE_PREFIX",
                             "ZENITH_COMM_TIMEOUT",
                             "ZENITH_COMM_ADDR",
                             "ZENITH_COMM_CHECK",
                             "ZENITH_JOB_ID",
                             "ZENITH_JOB_DIR",
                             "ZENITH_RESTART_COUNT",
                             "DEVICE_ID"};

// Sets variables for one test and restores the previous environment afterwards.
class EnvGuard {
 public:
  EnvGuard() {
    for (const char* v : kVars) {
      const char* old = std::getenv(v);
      saved_.emplace_back(v, old ? std::optional<std::string>(old) : std::nullopt);
      unsetenv(v);
    }
  }
  ~EnvGuard() {
    for (const auto& [k, v] : saved_) {
      if (v)
        setenv(k.c_str(), v->c_str(), 1);
      else
        unsetenv(k.c_str());
    }
  }
  void set(const char* k, const std::string& v) { setenv(k, v.c_str(), 1); }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

std::string write_rank_table(const std::string& dir, int ranks, int servers = 1) {
  std::string servers_json;
  for (int s = 0; s < servers; ++s) {
    std::string devices;
    for (int r = s; r < ranks; r += servers)
      devices += std::string(devices.empty() ? "" : ",") + "{\"device_id\": \"" +
                 std::to_string(r / servers) + "\", \"device_ip\": \"127.0.0.1\", \"rank_id\": \"" +
                 std::to_string(r) + "\"}";
    servers_json += std::string(servers_json.empty() ? "" : ",") + "{\"server_id\": \"10.0.0." +
                    std::to_string(s + 1) + "\", \"device\": [" + devices + "]}";
  }
  const auto path = dir + "/rank_table.json";
  std::ofstream(path) << "{\"version\": \"1.0\", \"server_count\": \"" << servers
                      << "\", \"server_list\": [" << servers_json
                      << "], \"status\": \"completed\"}";
  return path;
}

TEST(DistEnvironment, ParsesTheMindSporeRankTable) {
  TempDir dir("distributed");
  auto table = distributed::parse_rank_table(write_rank_table(dir.str(), 4, 2));
  ASSERT_EQ(table.ranks.size(), 4u);
  EXPECT_EQ(table.server_count, 2);
  EXPECT_EQ(table.ranks[3].rank, 3);
  EXPECT_EQ(table.ranks[3].server_id, "10.0.0.2");
  EXPECT_EQ(table.ranks[2].device_id, 1);
  EXPECT_EQ(table.ranks[0].device_ip, "127.0.0.1");

  const auto bad = dir.str() + "/bad.json";
  std::ofstream(bad) << R"({"server_count": "1", "server_list": [{"server_id": "h",
      "device": [{"device_id": "0", "device_ip": "x", "rank_id": "1"}]}]})";
  try {
    distributed::parse_rank_table(bad);
    ADD_FAILURE() << "rank ids 1.. accepted";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "missing or repeated rank 0")) << e.what();
  }
  std::ofstream(bad) << R"({"server_list": [{"server_id": "h", "device": [{"rank_id": 0}]}]})";
  EXPECT_THROW(distributed::parse_rank_table(bad), Error);  // numbers where strings belong
  std::ofstream(bad) << "not json";
  EXPECT_THROW(distributed::parse_rank_table(bad), Error);
  EXPECT_THROW(distributed::parse_rank_table(dir.str() + "/missing.json"), Error);
}

TEST(DistEnvironment, ResolvesRankStoreTimeoutAndAddress) {
  TempDir dir("distributed");
  {
    EnvGuard env;
    env.set("RANK_ID", "1");
    env.set("RANK_TABLE_FILE", write_rank_table(dir.str(), 2));
    env.set("ZENITH_JOB_ID", "42");
    env.set("ZENITH_RESTART_COUNT", "3");
    env.set("ZENITH_JOB_DIR", dir.str());
    env.set("ZENITH_COMM_TIMEOUT", "1500ms");
    auto c = distributed::resolve_config({});
    EXPECT_EQ(c.rank, 1);
    EXPECT_EQ(c.size, 2);  // from the table
    EXPECT_EQ(c.store_url, "file://" + dir.str() + "/rendezvous");
    EXPECT_EQ(c.prefix, "zenith/job42/attempt3");
    EXPECT_EQ(c.timeout, std::chrono::milliseconds(1500));
    EXPECT_EQ(c.address, "127.0.0.1");
    EXPECT_TRUE(c.check_inputs);
  }
  {
    EnvGuard env;  // torchrun: the store defaults to rank 0's TCP store at MASTER_ADDR:PORT
    env.set("RANK", "0");
    env.set("WORLD_SIZE", "4");
    env.set("MASTER_ADDR", "127.0.0.1");
    env.set("MASTER_PORT", "29500");
    env.set("ZENITH_COMM_CHECK", "0");
    auto c = distributed::resolve_config({});
    EXPECT_EQ(c.size, 4);
    EXPECT_EQ(c.store_url, "tcp://127.0.0.1:29500");
    EXPECT_EQ(c.timeout, std::chrono::seconds(60));
    EXPECT_FALSE(c.check_inputs);
    comm::Options o;  // explicit options win over the environment
    o.rank = 2;
    o.store = "redis://127.0.0.1:6379";
    o.timeout = std::chrono::seconds(7);
    c = distributed::resolve_config(o);
    EXPECT_EQ(c.rank, 2);
    EXPECT_EQ(c.store_url, "redis://127.0.0.1:6379");
    EXPECT_EQ(c.timeout, std::chrono::seconds(7));
  }
  {
    EnvGuard env;
    env.set("RANK_ID", "0");
    env.set("RANK_SIZE", "3");
    env.set("RANK_TABLE_FILE", write_rank_table(dir.str(), 2));
    try {
      distributed::resolve_config({});
      ADD_FAILURE() << "size mismatch accepted";
    } catch (const Error& e) {
      EXPECT_TRUE(contains(e.what(), "lists 2 devices but the group size is 3")) << e.what();
    }
  }
  {
    EnvGuard env;
    try {
      distributed::resolve_config({});
      ADD_FAILURE() << "no rank accepted";
    } catch (const Error& e) {
      EXPECT_TRUE(contains(e.what(), "set RANK_ID and RANK_SIZE")) << e.what();
    }
    env.set("RANK", "0");
    env.set("WORLD_SIZE", "2");
    EXPECT_THROW(distributed::resolve_config({}), Error);  // two ranks, no store
  }
  EXPECT_EQ(distributed::parse_timeout("5"), std::chrono::seconds(5));
  EXPECT_EQ(distributed::parse_timeout("2.5s"), std::chrono::milliseconds(2500));
  EXPECT_EQ(distributed::parse_timeout("250ms"), std::chrono::milliseconds(250));
  EXPECT_THROW(distributed::parse_timeout("soon"), Error);
  EXPECT_THROW(distributed::parse_timeout("-1"), Error);
}

// Runs `n` ranks that call the plain init() with `env` set, and checks the log line.
void run_env_ranks(int n, const std::function<void(int, EnvGuard&)>& setup,
                   const std::string& log_dir) {
  auto results = test::run_ranks(n, [&](int rank) {
    EnvGuard env;
    setup(rank, env);
    const auto log = log_dir + "/rank" + std::to_string(rank) + ".err";
    expect(std::freopen(log.c_str(), "w", stderr) != nullptr, "cannot redirect stderr");
    comm::init();
    std::fflush(stderr);
    std::ifstream in(log);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    expect(contains(text, "[INFO] comm initialized with " + std::to_string(n) +
                              " devices (backend gloo)"),
           "log was: ", text);
    expect(comm::get_rank() == rank && comm::get_group_size() == n, "rank ", comm::get_rank(),
           " size ", comm::get_group_size());
    auto t = Tensor::full({2}, 1.0);
    comm::all_reduce(t);
    expect(t.to_double_vector() == std::vector<double>(2, double(n)), "sum");
    comm::release();
  });
  for (const auto& r : results) EXPECT_TRUE(r.ok()) << test::describe(results);
}

TEST(DistEnvironment, InitFromMindSporeVariables) {
  TempDir dir("distributed");
  const auto table = write_rank_table(dir.str(), 2);
  run_env_ranks(
      2,
      [&](int rank, EnvGuard& env) {
        env.set("RANK_ID", std::to_string(rank));
        env.set("RANK_SIZE", "2");
        env.set("RANK_TABLE_FILE", table);  // store: a file store next to the table
        env.set("ZENITH_COMM_TIMEOUT", "20");
      },
      dir.str());
}

TEST(DistEnvironment, InitFromTorchrunVariables) {
  TempDir dir("distributed");
  const auto port = std::to_string(test::free_port());
  run_env_ranks(
      4,
      [&](int rank, EnvGuard& env) {
        env.set("RANK", std::to_string(rank));
        env.set("WORLD_SIZE", "4");
        env.set("MASTER_ADDR", "127.0.0.1");
        env.set("MASTER_PORT", port);  // rank 0 serves the TCP store here
      },
      dir.str());
}

TEST(DistEnvironment, InitFromRedisStoreVariable) {
  if (!test::RedisServer::installed()) GTEST_SKIP() << "redis-server is not installed";
  TempDir dir("distributed");
  test::RedisServer redis;
  run_env_ranks(
      2,
      [&](int rank, EnvGuard& env) {
        env.set("RANK_ID", std::to_string(rank));
        env.set("RANK_SIZE", "2");
        env.set("ZENITH_STORE", redis.url());
        env.set("ZENITH_STORE_PREFIX", "env-test");
      },
      dir.str());
}

}  // namespace
}  // namespace zenith
