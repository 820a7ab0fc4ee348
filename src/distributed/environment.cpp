#include "distributed/environment.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "zenith/error.h"

namespace zenith::distributed {

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

int parse_int(const std::string& text, const std::string& what) {
  try {
    size_t used = 0;
    int v = std::stoi(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {
  }
  ZENITH_FAIL("[communication] ", what, " must be an integer, got '", text, "'");
}

bool is_loopback_host(const std::string& host) {
  return host.empty() || host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

}  // namespace

std::chrono::milliseconds parse_timeout(const std::string& text) {
  std::string num = text;
  double scale = 1000.0;
  if (num.size() > 2 && num.substr(num.size() - 2) == "ms") {
    num.resize(num.size() - 2);
    scale = 1.0;
  } else if (num.size() > 1 && num.back() == 's') {
    num.pop_back();
  }
  try {
    size_t used = 0;
    double v = std::stod(num, &used);
    if (used == num.size() && v > 0) return std::chrono::milliseconds(int64_t(v * scale + 0.5));
  } catch (const std::exception&) {
  }
  ZENITH_FAIL("[communication] timeout must be a positive number of seconds (or '<n>ms'), got '",
              text, "'");
}

RankTable parse_rank_table(const std::string& path) {
  std::ifstream in(path);
  ZENITH_CHECK(in.good(), "[communication] cannot read rank table ", path);
  nlohmann::json j;
  try {
    in >> j;
  } catch (const std::exception& e) {
    ZENITH_FAIL("[communication] rank table ", path, " is not valid JSON: ", e.what());
  }
  auto str = [&](const nlohmann::json& obj, const char* key) {
    ZENITH_CHECK(obj.is_object() && obj.contains(key) && obj[key].is_string(),
                 "[communication] rank table ", path, ": expected string field '", key, "'");
    return obj[key].get<std::string>();
  };
  RankTable table;
  ZENITH_CHECK(j.contains("server_list") && j["server_list"].is_array(),
               "[communication] rank table ", path, ": expected array 'server_list'");
  for (const auto& server : j["server_list"]) {
    const auto server_id = str(server, "server_id");
    ZENITH_CHECK(server.contains("device") && server["device"].is_array(),
                 "[communication] rank table ", path, ": server ", server_id,
                 " has no 'device' array");
    for (const auto& dev : server["device"]) {
      RankTableEntry e;
      e.rank = parse_int(str(dev, "rank_id"), "rank table rank_id");
      e.device_id = parse_int(str(dev, "device_id"), "rank table device_id");
      e.device_ip = str(dev, "device_ip");
      e.server_id = server_id;
      table.ranks.push_back(e);
    }
  }
  table.server_count = j.contains("server_count")
                           ? parse_int(str(j, "server_count"), "rank table server_count")
                           : int(j["server_list"].size());
  ZENITH_CHECK(table.server_count == int(j["server_list"].size()), "[communication] rank table ",
               path, ": server_count ", table.server_count, " but ", j["server_list"].size(),
               " servers listed");
  std::sort(table.ranks.begin(), table.ranks.end(),
            [](const auto& a, const auto& b) { return a.rank < b.rank; });
  for (size_t i = 0; i < table.ranks.size(); ++i)
    ZENITH_CHECK(table.ranks[i].rank == int(i), "[communication] rank table ", path,
                 ": rank ids must be 0..", table.ranks.size() - 1,
                 " each exactly once (missing or repeated rank ", i, ")");
  ZENITH_CHECK(!table.ranks.empty(), "[communication] rank table ", path, " lists no devices");
  return table;
}

Config resolve_config(const communication::Options& o) {
  Config c;
  const auto table_file = env("RANK_TABLE_FILE");
  RankTable table;
  if (!table_file.empty()) table = parse_rank_table(table_file);

  // Rank and size: explicit options, then MindSpore, then torchrun, then the table's size.
  auto pick = [&](int given, const char* ms, const char* torch) {
    if (given >= 0) return given;
    if (!env(ms).empty()) return parse_int(env(ms), ms);
    if (!env(torch).empty()) return parse_int(env(torch), torch);
    return -1;
  };
  c.rank = pick(o.rank, "RANK_ID", "RANK");
  c.size = pick(o.size, "RANK_SIZE", "WORLD_SIZE");
  if (c.size < 0 && !table.ranks.empty()) c.size = int(table.ranks.size());
  ZENITH_CHECK(c.rank >= 0 && c.size > 0,
               "[communication] cannot tell this process's rank and group size: set RANK_ID and "
               "RANK_SIZE (MindSpore) or RANK and WORLD_SIZE (torchrun), or pass Options");
  ZENITH_CHECK(c.rank < c.size, "[communication] rank ", c.rank, " out of range for ", c.size,
               " ranks");
  if (!table.ranks.empty())
    ZENITH_CHECK(int(table.ranks.size()) == c.size, "[communication] rank table ", table_file,
                 " lists ", table.ranks.size(), " devices but the group size is ", c.size);

  // Timeout.
  c.timeout = o.timeout.count() > 0                 ? o.timeout
              : !env("ZENITH_COMM_TIMEOUT").empty() ? parse_timeout(env("ZENITH_COMM_TIMEOUT"))
                                                    : std::chrono::milliseconds(60000);

  // Store.
  const auto master_addr = env("MASTER_ADDR");
  const auto master_port = env("MASTER_PORT");
  if (!o.store.empty())
    c.store_url = o.store;
  else if (!env("ZENITH_STORE").empty())
    c.store_url = env("ZENITH_STORE");
  else if (!master_addr.empty() && !master_port.empty() && master_port != "0")
    c.store_url = "tcp://" + master_addr + ":" + master_port;
  else if (!env("ZENITH_JOB_DIR").empty())
    c.store_url =
        "file://" + std::filesystem::absolute(env("ZENITH_JOB_DIR")).string() + "/rendezvous";
  else if (!table_file.empty() && table.server_count == 1)
    c.store_url =
        "file://" + std::filesystem::absolute(table_file).parent_path().string() + "/rendezvous";
  else if (c.size == 1)
    c.store_url = "";  // a single rank needs no rendezvous
  else
    ZENITH_FAIL(
        "[communication] no rendezvous store: set ZENITH_STORE (file:///dir, "
        "redis://host:port or tcp://host:port) or MASTER_ADDR and MASTER_PORT");

  // Prefix: per job and per restart when the platform says which, so reruns never meet
  // keys left behind by an earlier attempt.
  if (!o.prefix.empty())
    c.prefix = o.prefix;
  else if (!env("ZENITH_STORE_PREFIX").empty())
    c.prefix = env("ZENITH_STORE_PREFIX");
  else if (!env("ZENITH_JOB_ID").empty())
    c.prefix = "zenith/job" + env("ZENITH_JOB_ID") + "/attempt" +
               (env("ZENITH_RESTART_COUNT").empty() ? "0" : env("ZENITH_RESTART_COUNT"));
  else
    c.prefix = "zenith";

  // Listening address.
  if (!o.address.empty())
    c.address = o.address;
  else if (!env("ZENITH_COMM_ADDR").empty())
    c.address = env("ZENITH_COMM_ADDR");
  else if (!table.ranks.empty())
    c.address = table.server_count > 1 ? table.ranks[size_t(c.rank)].server_id : "127.0.0.1";
  else if (!is_loopback_host(master_addr)) {
    char host[256] = {0};  // ranks span hosts: listen on this host's name
    gethostname(host, sizeof host - 1);
    c.address = host;
  } else
    c.address = "127.0.0.1";

  // Input checks.
  if (o.check_inputs >= 0)
    c.check_inputs = o.check_inputs != 0;
  else
    c.check_inputs = env("ZENITH_COMM_CHECK") != "0";
  return c;
}

}  // namespace zenith::distributed
