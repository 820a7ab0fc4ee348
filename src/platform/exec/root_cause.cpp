#include "platform/exec/root_cause.h"

#include <signal.h>

#include <algorithm>

namespace zenith::platform {

bool failed(const RankEnd& end) { return end.signaled || end.code != 0 || end.oom; }

bool killed(const RankEnd& end) {
  if (end.oom) return true;
  if (!end.signaled) return false;
  return end.code != SIGTERM && end.code != SIGINT && end.code != SIGHUP && end.code != SIGPIPE;
}

namespace {

bool earlier(const RankEnd& a, const RankEnd& b) {
  return a.ended_at != b.ended_at ? a.ended_at < b.ended_at : a.rank < b.rank;
}

std::optional<RankEnd> first_where(const std::vector<RankEnd>& ends, bool (*pred)(const RankEnd&),
                                   double until) {
  std::optional<RankEnd> best;
  for (const auto& e : ends)
    if (pred(e) && e.ended_at <= until && (!best || earlier(e, *best))) best = e;
  return best;
}

}  // namespace

std::optional<RankEnd> root_cause(const std::vector<RankEnd>& ends) {
  constexpr double kAny = 1e300;
  const auto first = first_where(ends, failed, kAny);
  if (!first) return std::nullopt;
  if (killed(*first)) return first;
  if (auto k = first_where(ends, killed, first->ended_at + kPeerLossWindow)) return k;
  return first;
}

bool root_cause_settled(const std::vector<RankEnd>& ends, int world, double now) {
  const auto cause = root_cause(ends);
  if (!cause) return true;
  if (static_cast<int>(ends.size()) >= world || killed(*cause)) return true;
  double first = cause->ended_at;
  for (const auto& e : ends)
    if (failed(e)) first = std::min(first, e.ended_at);
  return now - first >= kSettleSeconds;
}

}  // namespace zenith::platform
