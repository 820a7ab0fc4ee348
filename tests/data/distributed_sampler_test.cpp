// DistributedSampler: disjoint shards that cover the data, one permutation per epoch shared by
// every rank, and the same items per step as one process with the combined batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "support/op_check.h"
#include "zenith/data.h"

using namespace zenith;
using namespace zenith::dataset;
using zenith::testing::throws_with;

namespace {

Dataset numbers(int64_t n) {
  std::vector<int64_t> v = std::vector<int64_t>(size_t(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = i;
  return TensorDataset({Tensor::from_vector(v, {n})}, {"x"});
}

std::vector<int64_t> items(const Dataset& ds, int64_t epoch) {
  std::vector<int64_t> out;
  auto it = ds.create_iterator(epoch, 1);
  while (auto row = it.next()) {
    auto v = (*row)[0].to_int_vector();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

}  // namespace

TEST(DistributedSampler, ShardsAreDisjointAndCoverTheEpoch) {
  for (int64_t shards : {2, 3, 4}) {
    std::multiset<int64_t> all;
    for (int64_t id = 0; id < shards; ++id) {
      auto shard = DistributedSampler(numbers(12), shards, id, {.seed = 7});
      EXPECT_EQ(shard.get_dataset_size(), 12 / shards);
      for (auto v : items(shard, 0)) all.insert(v);
    }
    std::multiset<int64_t> expected;
    for (int64_t i = 0; i < 12; ++i) expected.insert(i);
    EXPECT_EQ(all, expected) << shards << " shards";
  }
}

TEST(DistributedSampler, ReshufflesPerEpochTheSameWayOnEveryRank) {
  auto a0 = DistributedSampler(numbers(100), 2, 0, {.seed = 3});
  auto a0_again = DistributedSampler(numbers(100), 2, 0, {.seed = 3});  // another "process"
  EXPECT_EQ(items(a0, 0), items(a0_again, 0));
  EXPECT_EQ(items(a0, 5), items(a0_again, 5));
  EXPECT_NE(items(a0, 0), items(a0, 1));  // a new order each epoch
  // Still disjoint in a later epoch.
  auto a1 = DistributedSampler(numbers(100), 2, 1, {.seed = 3});
  std::set<int64_t> s0, s1;
  for (auto v : items(a0, 4)) s0.insert(v);
  for (auto v : items(a1, 4)) s1.insert(v);
  EXPECT_EQ(s0.size() + s1.size(), 100u);
  for (auto v : s0) EXPECT_EQ(s1.count(v), 0u);
}

TEST(DistributedSampler, RanksTogetherSeeTheCombinedBatchOfOneProcess) {
  const int64_t n = 64, shards = 4, b = 2;
  config::set_seed(11);
  auto single = numbers(n).shuffle().batch(shards * b, true);
  for (int64_t epoch : {0, 1}) {
    auto whole = items(single, epoch);
    std::vector<std::vector<int64_t>> per_rank;
    for (int64_t id = 0; id < shards; ++id)
      per_rank.push_back(items(DistributedSampler(numbers(n), shards, id).batch(b, true), epoch));
    for (int64_t step = 0; step < n / (shards * b); ++step) {
      std::multiset<int64_t> global(whole.begin() + step * shards * b,
                                    whole.begin() + (step + 1) * shards * b);
      std::multiset<int64_t> ranks;
      for (auto& r : per_rank) ranks.insert(r.begin() + step * b, r.begin() + (step + 1) * b);
      EXPECT_EQ(global, ranks) << "epoch " << epoch << " step " << step;
    }
  }
  config::set_seed(0);
}

TEST(DistributedSampler, OneShardIsExactlyShuffle) {
  config::set_seed(5);
  EXPECT_EQ(items(numbers(50).shuffle(), 2), items(DistributedSampler(numbers(50), 1, 0), 2));
  config::set_seed(0);
}

TEST(DistributedSampler, RemainderPadDropOrNone) {
  // 10 items, 4 shards.
  auto size = [](const std::string& mode, int64_t id) {
    return DistributedSampler(numbers(10), 4, id, {.shuffle = false, .remainder = mode})
        .get_dataset_size();
  };
  EXPECT_EQ(size("pad", 3), 3);
  EXPECT_EQ(size("drop", 3), 2);
  EXPECT_EQ(size("none", 1), 3);
  EXPECT_EQ(size("none", 2), 2);
  // Without shuffling shard i holds i, i+4, ...; padding wraps to the start.
  auto pad3 = DistributedSampler(numbers(10), 4, 3, {.shuffle = false});
  EXPECT_EQ(items(pad3, 0), (std::vector<int64_t>{3, 7, 1}));
  std::multiset<int64_t> none;
  for (int64_t id = 0; id < 4; ++id)
    for (auto v :
         items(DistributedSampler(numbers(10), 4, id, {.shuffle = false, .remainder = "none"}), 0))
      none.insert(v);
  EXPECT_EQ(none.size(), 10u);
  EXPECT_EQ(std::set<int64_t>(none.begin(), none.end()).size(), 10u);  // each item once
}

TEST(DistributedSampler, BadArgumentsAreClearErrors) {
  EXPECT_TRUE(
      throws_with([] { DistributedSampler(numbers(4), 0, 0); }, "num_shards must be positive"));
  EXPECT_TRUE(throws_with([] { DistributedSampler(numbers(4), 2, 2); }, "shard_id 2 out of range"));
  EXPECT_TRUE(throws_with([] { DistributedSampler(numbers(4), 2, 0, {.remainder = "wrap"}); },
                          "unknown remainder 'wrap'"));
}
