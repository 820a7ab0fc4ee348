#include "platform/exec/rank_table.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "core/atomic_file.h"

namespace zenith::platform {

nlohmann::json make_rank_table(const std::vector<RankInfo>& ranks) {
  nlohmann::json servers = nlohmann::json::array();
  std::vector<std::string> hosts;
  for (const auto& r : ranks)
    if (std::find(hosts.begin(), hosts.end(), r.host) == hosts.end()) hosts.push_back(r.host);
  for (const auto& host : hosts) {
    nlohmann::json devices = nlohmann::json::array();
    for (const auto& r : ranks) {
      if (r.host != host) continue;
      devices.push_back({{"device_id", std::to_string(r.device_id)},
                         {"device_ip", r.host},
                         {"rank_id", std::to_string(r.rank)}});
    }
    servers.push_back({{"server_id", host}, {"device", devices}});
  }
  return {{"version", "1.0"},
          {"server_count", std::to_string(hosts.size())},
          {"server_list", servers},
          {"status", "completed"}};
}

void write_rank_table(const std::string& path, const std::vector<RankInfo>& ranks) {
  core::write_file_atomic(path, make_rank_table(ranks).dump(2) + "\n");
}

std::map<std::string, std::string> rank_env(const RankEnvContext& ctx, const RankInfo& r) {
  return {{"RANK_ID", std::to_string(r.rank)},
          {"DEVICE_ID", std::to_string(r.device_id)},
          {"RANK_SIZE", std::to_string(ctx.world_size)},
          {"RANK_TABLE_FILE", ctx.rank_table_file},
          {"RANK", std::to_string(r.rank)},
          {"LOCAL_RANK", std::to_string(r.local_rank)},
          {"NODE_RANK", std::to_string(r.node_rank)},
          {"WORLD_SIZE", std::to_string(ctx.world_size)},
          {"MASTER_ADDR", ctx.master_addr},
          {"MASTER_PORT", std::to_string(ctx.master_port)},
          {"ZENITH_JOB_ID", ctx.job_id},
          {"ZENITH_RESTART_COUNT", std::to_string(ctx.restart_count)},
          {"ZENITH_JOB_DIR", ctx.job_dir},
          // Touching this file counts as activity for hang detection, like a log line.
          {"ZENITH_HEARTBEAT_FILE", ctx.job_dir + "/heartbeat"},
          // `zenith train` logs its metrics here too; the server ingests them (telemetry_ingest.h).
          {"ZENITH_METRICS_FILE",
           ctx.job_dir + "/logs/rank_" + std::to_string(r.rank) + ".metrics.jsonl"}};
}

std::map<std::string, std::string> memory_limit_env(std::int64_t memory_bytes) {
  if (memory_bytes <= 0) return {};
  return {{"MALLOC_ARENA_MAX", "1"}};
}

std::map<std::string, std::string> thread_env(int cores, bool shares_cores) {
  const std::string n = std::to_string(std::max(1, cores));
  std::map<std::string, std::string> env = {{"OMP_NUM_THREADS", n}, {"ZENITH_NUM_THREADS", n}};
  if (shares_cores)
    env["OMP_WAIT_POLICY"] = "PASSIVE";
  else
    env["GOMP_SPINCOUNT"] = "30000";
  return env;
}

int find_free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("[rank_table] socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  close(fd);
  if (port == 0) throw std::runtime_error("[rank_table] no free port on 127.0.0.1");
  return port;
}

}  // namespace zenith::platform
