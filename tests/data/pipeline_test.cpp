// The pipeline: shuffle/map/batch/repeat semantics, and the same items in the same order for
// a seed whatever the worker count.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <thread>

#include "support/op_check.h"
#include "zenith/data.h"

namespace zt = zenith::testing;
using zenith::DType;
using zenith::Tensor;
using zenith::dataset::Dataset;

namespace {

// Items 0..n-1: image [2, 2, 1] filled with i, label i.
Dataset numbers(int64_t n) {
  std::vector<double> images, labels;
  for (int64_t i = 0; i < n; ++i) {
    for (int k = 0; k < 4; ++k) images.push_back(double(i));
    labels.push_back(double(i));
  }
  return zenith::dataset::TensorDataset({Tensor::from_vector(images, {n, 2, 2, 1}, DType::f32),
                                         Tensor::from_vector(labels, {n}, DType::i64)},
                                        {"image", "label"});
}

std::vector<std::vector<float>> drain(const Dataset& ds, int64_t epoch, int workers) {
  std::vector<std::vector<float>> out;
  auto it = ds.create_iterator(epoch, workers);
  while (auto row = it.next()) out.push_back((*row)[0].to_float_vector());
  return out;
}

TEST(Pipeline, BatchAndDropRemainder) {
  auto ds = numbers(10);
  EXPECT_EQ(ds.batch(4).get_dataset_size(), 3);
  EXPECT_EQ(ds.batch(4, true).get_dataset_size(), 2);
  auto last = ds.batch(4).get(2);
  EXPECT_EQ(last[0].shape(), (zenith::Shape{2, 2, 2, 1}));
  EXPECT_EQ(last[1].to_int_vector(), (std::vector<int64_t>{8, 9}));
  EXPECT_TRUE(zt::throws_with([&] { ds.batch(0); }, "batch_size must be positive"));
  EXPECT_TRUE(zt::throws_with([&] { ds.batch(4).get(3); }, "index 3 out of range"));
}

TEST(Pipeline, ShuffleIsAPermutationPerEpochAndSeeded) {
  auto ds = numbers(50).shuffle(7);
  auto labels = [&](int64_t epoch) {
    std::vector<int64_t> l;
    for (int64_t i = 0; i < 50; ++i) l.push_back(int64_t(ds.get(i, epoch)[1].item()));
    return l;
  };
  auto e0 = labels(0), e1 = labels(1);
  EXPECT_EQ(std::set<int64_t>(e0.begin(), e0.end()).size(), 50u);
  EXPECT_NE(e0, e1);
  EXPECT_EQ(e0, labels(0));
  auto other_seed = numbers(50).shuffle(8);
  EXPECT_NE(other_seed.get(0, 0)[1].item() * 100 + other_seed.get(1, 0)[1].item(),
            ds.get(0, 0)[1].item() * 100 + ds.get(1, 0)[1].item());
}

TEST(Pipeline, RepeatShufflesEachPass) {
  auto ds = numbers(6).shuffle(1).repeat(2);
  ASSERT_EQ(ds.get_dataset_size(), 12);
  std::vector<int64_t> first, second;
  for (int i = 0; i < 6; ++i) first.push_back(int64_t(ds.get(i)[1].item()));
  for (int i = 6; i < 12; ++i) second.push_back(int64_t(ds.get(i)[1].item()));
  EXPECT_EQ(std::set<int64_t>(second.begin(), second.end()).size(), 6u);
  EXPECT_NE(first, second);
}

TEST(Pipeline, SameItemsForAnyWorkerCount) {
  zenith::dataset::config::set_seed(123);
  auto ds = numbers(37)
                .shuffle()
                .map({zenith::vision::RandomCrop(2, 1), zenith::vision::RandomHorizontalFlip(),
                      zenith::vision::HWC2CHW()},
                     "image", 4)
                .batch(5);
  zenith::dataset::config::set_seed(0);
  for (int64_t epoch : {0, 3}) {
    auto one = drain(ds, epoch, 1);
    ASSERT_EQ(one.size(), 8u);
    for (int workers : {2, 3, 8}) EXPECT_EQ(drain(ds, epoch, workers), one) << workers;
  }
  EXPECT_NE(drain(ds, 0, 2), drain(ds, 1, 2));
}

TEST(Pipeline, UnknownColumnAndSlice) {
  auto ds = numbers(10);
  EXPECT_TRUE(zt::throws_with([&] { ds.map({zenith::vision::HWC2CHW()}, "img"); },
                              "unknown input column 'img' (columns: image, label)"));
  auto val = ds.slice(8, 2);
  EXPECT_EQ(val.get_dataset_size(), 2);
  EXPECT_EQ(val.get(1)[1].item(), 9);
  EXPECT_EQ(ds.take(3).get_dataset_size(), 3);
  EXPECT_TRUE(zt::throws_with([&] { ds.slice(8, 5); }, "out of range"));
}

TEST(Pipeline, PrefetchKeepsTheConsumerFed) {
  // Each item costs 2 ms to make, on 4 workers. Counted by events, not by the clock (which a
  // loaded machine stretches): while the consumer holds an item and asks for nothing, the
  // workers make the next ones, up to 4 ahead of it, for every item of the epoch.
  std::atomic<int64_t> made{0};
  auto slow = zenith::transforms::Lambda([&made](const Tensor& x) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ++made;
    return x;
  });
  auto ds = numbers(60).map({slow}, "image", 4);
  auto it = ds.create_iterator(0);
  // Whether `count` items are made within 10 s (a bound for failing only, never reached when
  // the workers run ahead).
  auto made_reaches = [&](int64_t count) {
    for (int i = 0; i < 10000 && made.load() < count; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return made.load() >= count;
  };
  int64_t n = 0;
  while (auto row = it.next()) {
    ++n;
    ASSERT_TRUE(made_reaches(std::min<int64_t>(60, n + 4)))
        << "with item " << n << " in hand, the workers made " << made.load() << " items";
  }
  EXPECT_EQ(n, 60);
  EXPECT_EQ(made.load(), 60);
  // Destroying an iterator mid-epoch stops its workers.
  auto partial = ds.create_iterator(0);
  EXPECT_TRUE(partial.next());
}

}  // namespace
