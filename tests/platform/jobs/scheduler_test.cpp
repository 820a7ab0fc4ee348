#include "platform/jobs/scheduler.h"

#include <gtest/gtest.h>

namespace zp = zenith::platform;

namespace {

std::vector<zp::FreeDevice> cpus(std::vector<int> idx) {
  std::vector<zp::FreeDevice> out;
  for (int i : idx) out.push_back({i, "cpu"});
  return out;
}

}  // namespace

TEST(PlatformScheduler, GangAllOrNothing) {
  auto p = zp::schedule({{1, 0, 1, 4, "cpu", 0}}, cpus({0, 1, 2}));
  EXPECT_TRUE(p.empty());
  p = zp::schedule({{1, 0, 1, 3, "cpu", 0}}, cpus({5, 1, 2}));
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].devices, (std::vector<int>{1, 2, 5}));
}

TEST(PlatformScheduler, HigherPriorityFirstThenFifo) {
  std::vector<zp::QueuedJob> q = {
      {1, 0, 1, 2, "cpu", 0}, {2, 5, 2, 2, "cpu", 0}, {3, 5, 3, 2, "cpu", 0}};
  auto p = zp::schedule(q, cpus({0, 1, 2, 3}));
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].job_id, 2);
  EXPECT_EQ(p[1].job_id, 3);
}

TEST(PlatformScheduler, SmallJobsBackfillAroundABigOne) {
  std::vector<zp::QueuedJob> q = {{1, 0, 1, 4, "cpu", 10}, {2, 0, 2, 2, "cpu", 0}};
  auto p = zp::schedule(q, cpus({0, 1, 2}));
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].job_id, 2);
}

TEST(PlatformScheduler, AStarvingJobStopsBackfill) {
  std::vector<zp::QueuedJob> q = {{1, 0, 1, 4, "cpu", 1000}, {2, 0, 2, 2, "cpu", 0}};
  zp::SchedulerOptions o;
  o.starvation_s = 600;
  EXPECT_TRUE(zp::schedule(q, cpus({0, 1, 2}), o).empty());
}

TEST(PlatformScheduler, MatchesDeviceKind) {
  std::vector<zp::FreeDevice> free = {{0, "cpu"}, {1, "cuda"}};
  auto p = zp::schedule({{1, 0, 1, 1, "cuda", 0}}, free);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].devices, std::vector<int>{1});
}

TEST(PlatformScheduler, RejectsJobsThatCanNeverFit) {
  auto why = zp::never_fits(64, "cpu", 1, 8, "local");
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ(*why, "the job asks for 64 cpu devices but this host has 8");
  EXPECT_TRUE(zp::never_fits(2, "cpu", 2, 8, "local").has_value());
  EXPECT_FALSE(zp::never_fits(8, "cpu", 1, 8, "local").has_value());
  EXPECT_FALSE(zp::never_fits(64, "cpu", 1, 8, "slurm").has_value());
}

TEST(PlatformScheduler, RefusesWhatTheSlurmPartitionCannotHold) {
  const zp::PartitionNodes debug{"debug", {2, 2}, {0, 0}};
  EXPECT_FALSE(zp::never_fits_partition(2, "cpu", 2, debug).has_value());
  EXPECT_FALSE(zp::never_fits_partition(1, "cpu", 1, debug).has_value());
  EXPECT_EQ(zp::never_fits_partition(1, "cpu", 3, debug),
            "the job asks for 3 nodes but Slurm partition 'debug' has 2");
  EXPECT_EQ(zp::never_fits_partition(3, "cpu", 2, debug),
            "the job asks for 3 cpu devices on each of 2 nodes but 0 of the 2 nodes of Slurm "
            "partition 'debug' have 3 CPUs (the most a node has: 2)");
  EXPECT_EQ(zp::never_fits_partition(1, "cuda", 1, debug),
            "the job asks for 1 cuda devices on each of 1 node but 0 of the 2 nodes of Slurm "
            "partition 'debug' have 1 GPUs (the most a node has: 0)");
  // Mixed nodes: two of the three hold 8 GPUs.
  const zp::PartitionNodes gpu{"gpu", {64, 64, 32}, {8, 8, 4}};
  EXPECT_FALSE(zp::never_fits_partition(8, "cuda", 2, gpu).has_value());
  EXPECT_TRUE(zp::never_fits_partition(8, "cuda", 3, gpu).has_value());
  EXPECT_FALSE(zp::never_fits_partition(4, "cuda", 3, gpu).has_value());
}

TEST(PlatformScheduler, MemoryAndStorageAreCheckedAgainstTheHost) {
  const zp::HostCapacity host{24LL << 30, 250LL << 30};
  auto why = zp::never_fits_host(64LL << 30, 100LL << 30, host);
  ASSERT_TRUE(why);
  EXPECT_EQ(*why, "the job asks for memory 64Gi but this host has 24Gi");
  why = zp::never_fits_host(1LL << 30, 300LL << 30, host);
  ASSERT_TRUE(why);
  EXPECT_EQ(*why, "the job asks for storage 300Gi but the filesystem of the job dirs holds 250Gi");
  EXPECT_FALSE(zp::never_fits_host(24LL << 30, 250LL << 30, host));
  EXPECT_FALSE(zp::never_fits_host(0, 0, host));             // nothing asked
  EXPECT_FALSE(zp::never_fits_host(64LL << 30, 0, {0, 0}));  // nothing known
  // This host's numbers are real ones.
  const auto here = zp::host_capacity(".");
  EXPECT_GT(here.memory_bytes, 64LL << 20);
  EXPECT_GT(here.storage_bytes, 0);
}
