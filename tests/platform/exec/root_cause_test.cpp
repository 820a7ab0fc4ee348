// The root cause of a failed attempt (src/platform/exec/root_cause.h), fed the ranks' ends in
// both orders: a rank killed by SIGKILL and its peer that exits 1 on the lost connection.
#include "platform/exec/root_cause.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>

namespace zp = zenith::platform;

namespace {

const zp::RankEnd kKilled{1, true, SIGKILL, 100.00};
const zp::RankEnd kPeerLost{0, false, 1, 100.05};

// The cause and whether it is settled after each end is learnt in `order`, at time `now`.
std::vector<std::pair<int, bool>> feed(std::vector<zp::RankEnd> order, double now) {
  std::vector<std::pair<int, bool>> seen;
  std::vector<zp::RankEnd> ends;
  for (const auto& e : order) {
    ends.push_back(e);
    const auto cause = zp::root_cause(ends);
    seen.push_back({cause ? cause->rank : -1, zp::root_cause_settled(ends, 2, now)});
  }
  return seen;
}

}  // namespace

TEST(RootCause, TheKilledRankIsNamedWhicheverEndIsLearntFirst) {
  // The killed rank first: settled at once.
  EXPECT_EQ(feed({kKilled, kPeerLost}, 100.1),
            (std::vector<std::pair<int, bool>>{{1, true}, {1, true}}));
  // The peer's exit first: not settled while rank 1 may still report, then rank 1.
  EXPECT_EQ(feed({kPeerLost, kKilled}, 100.1),
            (std::vector<std::pair<int, bool>>{{0, false}, {1, true}}));
}

TEST(RootCause, AKilledRankBeatsAPeerThatRecordedItsExitEarlierUnderLoad) {
  // Rank 1's end was written late (its wrapper scheduled after rank 0's): still rank 1.
  zp::RankEnd late_kill = kKilled;
  late_kill.ended_at = kPeerLost.ended_at + 0.8;
  for (auto order : {std::vector<zp::RankEnd>{kPeerLost, late_kill},
                     std::vector<zp::RankEnd>{late_kill, kPeerLost}}) {
    auto cause = zp::root_cause(order);
    ASSERT_TRUE(cause);
    EXPECT_EQ(cause->rank, 1);
    EXPECT_TRUE(cause->signaled);
    EXPECT_EQ(cause->code, SIGKILL);
  }
}

TEST(RootCause, TheOomKillerCountsAsAKill) {
  zp::RankEnd oom{1, false, 137, 100.3, true};
  EXPECT_EQ(zp::root_cause({kPeerLost, oom})->rank, 1);
}

TEST(RootCause, AStopRequestAfterAGenuineFailureDoesNotTakeTheBlame) {
  // Rank 0 fails; srun SIGTERMs rank 1 (a request to stop), or SIGKILLs it after KillWait.
  const zp::RankEnd failure{0, false, 3, 100.0};
  const zp::RankEnd stopped{1, true, SIGTERM, 100.2};
  const zp::RankEnd killed_later{1, true, SIGKILL, 100.0 + zp::kPeerLossWindow + 3};
  EXPECT_EQ(zp::root_cause({stopped, failure})->rank, 0);
  EXPECT_EQ(zp::root_cause({killed_later, failure})->rank, 0);
  EXPECT_EQ(zp::root_cause({{1, true, SIGPIPE, 99.9}, failure})->rank, 1)
      << "the first failure in time, when no rank was killed";
}

TEST(RootCause, APlainFailureSettlesWhenEveryRankEndedOrAfterTheSettleTime) {
  const zp::RankEnd failure{0, false, 3, 100.0};
  EXPECT_FALSE(zp::root_cause_settled({failure}, 2, 100.0 + zp::kSettleSeconds - 0.1));
  EXPECT_TRUE(zp::root_cause_settled({failure}, 2, 100.0 + zp::kSettleSeconds));
  EXPECT_TRUE(zp::root_cause_settled({failure, {1, false, 0, 100.1}}, 2, 100.1));
  EXPECT_FALSE(zp::root_cause({{0, false, 0, 1.0}, {1, false, 0, 2.0}}));
}

TEST(RootCause, TiesInTimeGoToTheLowerRank) {
  EXPECT_EQ(zp::root_cause({{2, false, 1, 5.0}, {1, false, 1, 5.0}})->rank, 1);
  EXPECT_EQ(zp::root_cause({{2, true, SIGKILL, 5.0}, {1, true, SIGSEGV, 5.0}})->rank, 1);
}
