// Turns communication::Options plus the environment the platform provides (MindSpore's
// RANK_ID/RANK_SIZE/RANK_TABLE_FILE, torchrun's RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, and
// ZENITH_* settings) into one complete configuration.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "zenith/communication.h"

namespace zenith::distributed {

struct RankTableEntry {
  int rank = 0;
  int device_id = 0;
  std::string device_ip;
  std::string server_id;
};

// MindSpore rank table: {"version", "server_count", "server_list": [{"server_id",
// "device": [{"device_id", "device_ip", "rank_id"}]}]}, all values strings.
struct RankTable {
  int server_count = 0;
  std::vector<RankTableEntry> ranks;  // sorted by rank, ranks 0..n-1 each exactly once
};
RankTable parse_rank_table(const std::string& path);

struct Config {
  int rank = 0;
  int size = 1;
  std::string store_url;
  std::string prefix;
  std::string address;  // where this rank listens
  std::chrono::milliseconds timeout{60000};
  bool check_inputs = true;
};

Config resolve_config(const communication::Options& options);

// "5" / "2.5" (seconds), "500ms", "5s" -> milliseconds; throws on anything else.
std::chrono::milliseconds parse_timeout(const std::string& text);

}  // namespace zenith::distributed
