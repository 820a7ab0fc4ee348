// One process of the ZeRO-3 memory demonstration (zero_memory_demo.h) for a launcher such as
// srun: `zero_memory_rank MODE OUT_DIR`, MODE one of
//   one           the whole model in one process, no limit: OUT_DIR/one_process.txt
//   one-limited   the same under the per-rank address-space limit: OUT_DIR/limited.txt
//   zero3         a ZeRO-3 rank under the limit (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
//                 from the launcher): OUT_DIR/rank<R>.txt, its node in OUT_DIR/rank<R>.node
// glibc's malloc arenas are limited to one: each arena a new thread (the communication threads)
// opens reserves 64 MiB of address space, which a forked rank finds already in its parent's
// address space (below its limit) but a fresh process would count against it.
// An error is printed and written to OUT_DIR/error<suffix>.txt (suffix: the mode, and the rank
// for zero3), exit status 1.
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>

#include "zero_memory_demo.h"

int main(int argc, char** argv) {
  using namespace zenith::zero_memory;
  if (argc != 3) {
    std::fprintf(stderr, "usage: zero_memory_rank one|one-limited|zero3 OUT_DIR\n");
    return 2;
  }
  mallopt(M_ARENA_MAX, 1);
  const std::string mode = argv[1], out = argv[2];
  const char* rank_env = std::getenv("RANK");
  const std::string rank = rank_env ? rank_env : "0";
  try {
    if (mode == "one") {
      train_one_process(out + "/one_process.txt");
    } else if (mode == "one-limited") {
      limit_address_space(kBudget);
      train_one_process(out + "/limited.txt");
    } else if (mode == "zero3") {
      limit_address_space(kBudget);
      const char* node = std::getenv("SLURMD_NODENAME");
      std::ofstream(out + "/rank" + rank + ".node") << (node ? node : "") << "\n";
      train_zero3_rank({}, out);
    } else {
      std::fprintf(stderr, "zero_memory_rank: unknown mode '%s'\n", mode.c_str());
      return 2;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zero_memory_rank %s: %s\n", mode.c_str(), e.what());
    std::ofstream(out + "/error-" + mode + (mode == "zero3" ? rank : "") + ".txt") << e.what();
    return 1;
  }
  return 0;
}
