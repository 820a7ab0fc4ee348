// Multi-rank runs of a subcommand, from both ends.
// Launching: `zenith <command> --nproc N ...` runs N ranks of the same command line (without the
// launcher's flags) as a platform job in the foreground, through the local executor; logs under
// ZENITH_DATA/runs/<id>/logs.
// In a rank: the platform sets WORLD_SIZE / RANK_SIZE > 1 (as for a job with `npu: N`); the rank
// joins the others (join_ranks), and a restarted job (ZENITH_RESTART_COUNT > 0) resumes from its
// output's newest checkpoint (restart_checkpoint).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "train/ranks.h"

namespace zenith::cli {

class RankLauncher {
 public:
  // `command`: the subcommand the ranks run, and the [prefix] of errors.
  explicit RankLauncher(std::string command) : command_(std::move(command)) {}

  // --nproc N and --max-restarts N.
  void add_flags(CLI::App& app);
  // Fails on negative values, or on --nproc > 1 inside a job that already has its ranks.
  void check(int world_env) const;
  // True when this process starts the ranks instead of doing the work itself.
  bool launches() const { return nproc_ > 1; }
  // Runs this process's command line, minus --nproc and --max-restarts, as a job of N ranks in
  // the foreground; returns the job's exit code.
  int launch(int argc, char** argv) const;

 private:
  std::string command_;
  int nproc_ = 1;
  int max_restarts_ = 0;
};

// The job's world size from the platform's environment (WORLD_SIZE, else RANK_SIZE); 1 outside
// a multi-rank job.
int env_world_size(const std::string& command);

// With world_env > 1: joins the job's other ranks (communication::init()), by default with as
// many compute threads as cores the platform pinned this rank to (unless `threads` > 0 or
// ZENITH_NUM_THREADS is set). Returns this process's place among the ranks (train/ranks.h,
// the single process's outside a job).
Ranks join_ranks(int world_env, int64_t threads);

// In a restarted job (ZENITH_RESTART_COUNT > 0): the checkpoint in `dir` with the most training
// steps ("" when there is none yet), printed; elsewhere "". Every rank calls it before
// join_ranks(): rank 0 cannot write a newer checkpoint until all ranks have joined, so they all
// pick the same file.
std::string restart_checkpoint(const std::string& command, const std::string& dir);

}  // namespace zenith::cli
