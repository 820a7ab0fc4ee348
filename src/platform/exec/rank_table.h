// What every rank is told about its job: the MindSpore rank table and the MindSpore and
// torchrun environment variables.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace zenith::platform {

struct RankInfo {
  int rank = 0;
  int local_rank = 0;
  int device_id = 0;
  std::string host = "127.0.0.1";
  int node_rank = 0;  // the node's place in the job (0 on one host)
};

// MindSpore's rank-table JSON (version 1.0, all values strings), ranks grouped by host.
nlohmann::json make_rank_table(const std::vector<RankInfo>& ranks);

// Writes the table atomically and durably (fsynced temp file, rename, fsynced dir).
void write_rank_table(const std::string& path, const std::vector<RankInfo>& ranks);

struct RankEnvContext {
  std::string job_id;
  std::string job_dir;
  std::string rank_table_file;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  int world_size = 1;
  int restart_count = 0;
};

// RANK_ID, DEVICE_ID, RANK_SIZE, RANK_TABLE_FILE, RANK, LOCAL_RANK, NODE_RANK, WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT, ZENITH_JOB_ID, ZENITH_RESTART_COUNT, ZENITH_JOB_DIR,
// ZENITH_HEARTBEAT_FILE.
std::map<std::string, std::string> rank_env(const RankEnvContext& ctx, const RankInfo& rank);

// The OpenMP settings of a rank given `cores` cores: OMP_NUM_THREADS and ZENITH_NUM_THREADS to
// match, and a wait policy that keeps idle threads from spinning on cores another rank needs:
// OMP_WAIT_POLICY=PASSIVE when the device shares its cores with other devices, else a short
// spin (GOMP_SPINCOUNT=30000, about as fast as the default spin alone).
std::map<std::string, std::string> thread_env(int cores, bool shares_cores);

// For a rank under a memory limit (`memory_bytes` > 0; else nothing): MALLOC_ARENA_MAX=1, since
// each of glibc's per-thread malloc arenas reserves 64 MiB of address space, which RLIMIT_AS
// (the fallback limit, and Slurm's) counts. A job's own `env` may set it otherwise.
std::map<std::string, std::string> memory_limit_env(std::int64_t memory_bytes);

// A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0 and read it back).
int find_free_port();

}  // namespace zenith::platform
