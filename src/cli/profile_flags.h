// --profile STEPS and --profile-skip N for the training subcommands (train, finetune): the
// profiler over STEPS optimizer steps after N warm-up steps, written to OUT/profile/ and, in a
// platform job (ZENITH_JOB_DIR set), also to the job's profile dir, where the server's dashboard
// reads it (platform::JobPaths::profile_dir).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "zenith/train.h"

namespace zenith::cli {

struct ProfileFlags {
  int64_t steps = 0;  // 0: off
  int64_t skip = -1;  // -1: 1 step, 3 in graph mode (warmup_steps())

  void add(CLI::App& app);
  // Fails on negative counts.
  void check() const;
  // The steps before the profiled ones: --profile-skip, else 1, and in graph mode 3 (the
  // capture, the first replay, which records the memory plan, and the second, the arena's first
  // use, whose page faults land in every op).
  int64_t warmup_steps(bool graph_mode) const;
  // Null when off.
  callbacks::CallbackPtr callback(const std::string& out, int rank, int world,
                                  bool graph_mode = false) const;
};

}  // namespace zenith::cli
