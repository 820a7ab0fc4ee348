// Dynamic batching (src/serve/batcher.cpp): requests run together up to max_batch, each gets its
// own rows back, a full queue refuses, abandoned requests are skipped.
#include "serve/batcher.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <latch>
#include <mutex>
#include <thread>

namespace zenith::serve {
namespace {

// Output row of a sample = [sum of its inputs, n of the batch it ran in].
Batcher::RunFn sum_rows(int64_t numel, std::atomic<int>* runs, int sleep_ms = 0) {
  return [=](int, const std::vector<float>& in, int64_t n, int64_t* width) {
    if (sleep_ms) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
    ++*runs;
    *width = 2;
    std::vector<float> out;
    for (int64_t i = 0; i < n; ++i) {
      float s = 0;
      for (int64_t k = 0; k < numel; ++k) s += in[size_t(i * numel + k)];
      out.push_back(s);
      out.push_back(float(n));
    }
    return out;
  };
}

TEST(Batcher, ConcurrentRequestsShareRunsAndGetTheirOwnRows) {
  std::atomic<int> runs{0};
  std::mutex m;
  std::vector<int> sizes;
  // Each run takes 20 ms, as a model would: the requests that arrive meanwhile queue up and go
  // together. With instant runs, on a busy 2-core host the 32 threads' submissions can trickle
  // in one at a time, each finding an idle service and running alone (31 runs in one CI run).
  Batcher batcher({.max_batch = 16, .max_delay_ms = 50, .max_queue = 64, .replicas = 1}, 3,
                  sum_rows(3, &runs, /*sleep_ms=*/20), [&](int n, const std::vector<double>&) {
                    std::lock_guard lock(m);
                    sizes.push_back(n);
                  });
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  std::latch start(32);  // all submit at once, however slowly the threads were created
  for (int t = 0; t < 32; ++t)
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      auto r = batcher.submit({float(t), 1, 1}, 1);
      ASSERT_TRUE(r);
      auto result = r->promise.get_future().get();
      if (result.outputs.size() != 2 || result.outputs[0] != float(t + 2)) ++wrong;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong, 0);
  int total = 0;
  for (int s : sizes) {
    EXPECT_LE(s, 16);
    total += s;
  }
  EXPECT_EQ(total, 32);
  EXPECT_LT(runs.load(), 32);  // some requests shared a run
  EXPECT_LE(runs.load(), 16);  // two or more requests per run on average
}

TEST(Batcher, MaxBatchOneRunsEachRequestAlone) {
  std::atomic<int> runs{0};
  Batcher batcher({.max_batch = 1, .max_delay_ms = 20, .max_queue = 64, .replicas = 1}, 1,
                  sum_rows(1, &runs));
  std::vector<std::shared_ptr<BatchRequest>> reqs;
  for (int i = 0; i < 10; ++i) reqs.push_back(batcher.submit({float(i)}, 1));
  for (int i = 0; i < 10; ++i) {
    auto result = reqs[size_t(i)]->promise.get_future().get();
    EXPECT_EQ(result.batch_size, 1);
    EXPECT_EQ(result.outputs[0], float(i));
  }
  EXPECT_EQ(runs.load(), 10);
}

TEST(Batcher, MultiSampleRequestsAndFullQueue) {
  // The first run holds the worker until the queue has been checked: events, not sleeps, so a
  // loaded host cannot reorder the steps.
  std::atomic<int> runs{0};
  std::promise<void> running, release;
  std::shared_future<void> released = release.get_future().share();
  Batcher batcher({.max_batch = 4, .max_delay_ms = 1, .max_queue = 3, .replicas = 1}, 1,
                  [&, sum = sum_rows(1, &runs)](int replica, const std::vector<float>& in,
                                                int64_t n, int64_t* width) {
                    if (runs.load() == 0) {
                      running.set_value();
                      released.wait_for(std::chrono::seconds(30));  // no hang on failure
                    }
                    return sum(replica, in, n, width);
                  });
  auto first = batcher.submit({1, 2, 3}, 3);
  ASSERT_TRUE(first);
  running.get_future().wait();  // the worker took it and is in the run
  std::vector<std::shared_ptr<BatchRequest>> queued;
  for (int i = 0; i < 3; ++i) queued.push_back(batcher.submit({float(10 + i)}, 1));
  for (const auto& q : queued) ASSERT_TRUE(q);
  EXPECT_EQ(batcher.queue_depth(), 3);
  EXPECT_FALSE(batcher.submit({99}, 1));  // the queue holds 3
  release.set_value();
  auto r = first->promise.get_future().get();
  ASSERT_EQ(r.outputs.size(), 6u);
  EXPECT_EQ(r.outputs[0], 1);
  EXPECT_EQ(r.outputs[4], 3);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(queued[size_t(i)]->promise.get_future().get().outputs[0], 10 + i);
}

TEST(Batcher, AbandonedRequestsAreSkippedAndErrorsReachEveryRequest) {
  std::atomic<int> calls{0};
  Batcher batcher(
      {.max_batch = 8, .max_delay_ms = 30, .max_queue = 8, .replicas = 1}, 1,
      [&](int, const std::vector<float>& in, int64_t n, int64_t*) -> std::vector<float> {
        ++calls;
        EXPECT_EQ(n, 1);  // the abandoned one is not run
        EXPECT_EQ(in[0], 2.0f);
        throw std::runtime_error("[model] boom");
      });
  auto a = batcher.submit({1}, 1);
  a->abandoned = true;
  auto b = batcher.submit({2}, 1);
  auto rb = b->promise.get_future().get();
  EXPECT_EQ(rb.error, "[model] boom");
  EXPECT_EQ(calls.load(), 1);
}

}  // namespace
}  // namespace zenith::serve
