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
  int64_t skip = 1;

  void add(CLI::App& app);
  // Fails on negative counts.
  void check() const;
  // Null when off.
  callbacks::CallbackPtr callback(const std::string& out, int rank, int world) const;
};

}  // namespace zenith::cli
