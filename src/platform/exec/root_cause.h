// Which rank caused a failed attempt, as torchelastic reports it: the first failure in time,
// except that a rank killed by a signal or by the OOM killer comes before ranks that only lost
// that peer and exited non-zero shortly after it (their exit can be recorded first under load).
#pragma once

#include <optional>
#include <vector>

namespace zenith::platform {

// How one rank's entry ended, as an executor learnt it.
struct RankEnd {
  int rank = 0;
  bool signaled = false;
  int code = 0;         // exit code, or the signal number when `signaled`
  double ended_at = 0;  // when the entry ended, seconds since the epoch
  bool oom = false;     // the OOM killer ended it
};

// Seconds after the first failure within which a killed rank still counts as its cause. Below
// Slurm's KillWait (5 s in tests/support/slurm_cluster.sh): a rank that srun SIGKILLs after a
// peer's genuine failure must not be blamed for it.
constexpr double kPeerLossWindow = 2.0;

// Seconds an executor waits after the first failure while some rank has not reported how it
// ended: the rank that caused the failure may still be on its way.
constexpr double kSettleSeconds = 2.0;

// Failed: a non-zero exit or any signal.
bool failed(const RankEnd& end);

// Killed: by the OOM killer or by a signal other than a request to stop (SIGTERM, SIGINT,
// SIGHUP: what the platform and Slurm send the other ranks once one failed) or a lost peer
// (SIGPIPE).
bool killed(const RankEnd& end);

// The root cause among `ends`: the earliest killed rank that ended within kPeerLossWindow of
// the first failure, else the first failure (ties: the lower rank). nullopt: no rank failed.
std::optional<RankEnd> root_cause(const std::vector<RankEnd>& ends);

// Whether root_cause(ends) is final at `now` for an attempt of `world` ranks: every rank has
// ended, or the cause is a killed rank, or kSettleSeconds have passed since the first failure.
bool root_cause_settled(const std::vector<RankEnd>& ends, int world, double now);

}  // namespace zenith::platform
