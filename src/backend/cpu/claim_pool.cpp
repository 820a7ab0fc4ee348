// parallel_claim: one job at a time, published under a mutex as a shared_ptr, so a helper that
// wakes late holds a job whose counter is already exhausted and never calls its (by then gone)
// function.
#include "backend/cpu/claim_pool.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/time_slice.h"

namespace zenith::cpu {
namespace {

using SteadyClock = std::chrono::steady_clock;

// How long a helper polls for the next job before it sleeps: a decode step's GEMVs come a few
// microseconds apart; between steps (sampling, the caller's own work) it may sleep.
constexpr auto kSpin = std::chrono::microseconds(100);

// How long the caller spins for a helper's unfinished items before it yields its core (the helper
// may have been preempted onto it).
constexpr auto kWaitBeforeYield = std::chrono::microseconds(100);

// A caller that waited for a helper's item far longer than an item takes (the helper was
// descheduled mid-item: on a host busier than its cores that costs a time slice per call, and
// 2 threads ran a 110M decode at half the speed of 1) runs its calls alone for a while, then
// tries the helpers again (alone_after_lag). A fixed 50 ms after any lag left a 2-thread 110M
// q4_0 decode on the loaded host mostly serial: 17 lags, 7057 of 11220 calls alone, and half of
// the lags logged were 0.1-0.25 ms hiccups, not time slices.
constexpr auto kAloneAtMost = std::chrono::milliseconds(50);
constexpr int kAlonePerLag = 20;
constexpr auto kLagSlack = std::chrono::microseconds(50);
// A thread running items of a job (a helper, or the caller inside its own run): a nested
// parallel_claim on it runs serially, as the items' code expects of a nested call.
thread_local bool t_in_job = false;

struct Job {
  const std::function<void(int64_t)>* f;
  int64_t count;
  int helpers;  // helpers with a smaller index may join
  std::atomic<int64_t> next{0}, done{0};

  // Runs items until none is left to claim; returns how many this thread ran.
  int64_t work() {
    int64_t ran = 0;
    for (int64_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < count; ++ran) {
      (*f)(i);
      done.fetch_add(1, std::memory_order_release);
    }
    return ran;
  }
};

class Pool {
 public:
  void run(int64_t count, const std::function<void(int64_t)>& f, int threads) {
    grow(threads - 1);
    auto job = std::make_shared<Job>();
    job->f = &f;
    job->count = count;
    job->helpers = threads - 1;
    {
      std::lock_guard<std::mutex> lock(mu_);
      current_ = job;
      epoch_.fetch_add(1, std::memory_order_release);
    }
    if (sleeping_.load() > 0) cv_.notify_all();
    const auto start = SteadyClock::now();
    const int64_t ran = job->work();
    if (job->done.load(std::memory_order_acquire) == count) return;
    // Only items a helper claimed are left: it is running them. Yield only after a while: on a
    // loaded machine a yield can hand the core to another process for a whole time slice.
    const auto waiting = SteadyClock::now(), patience = waiting + kWaitBeforeYield;
    for (int spins = 0; job->done.load(std::memory_order_acquire) < count; ++spins) {
      _mm_pause();
      if (spins % 64 == 63 && SteadyClock::now() > patience) std::this_thread::yield();
    }
    const auto end = SteadyClock::now();
    const auto alone =
        alone_after_lag(end - waiting, (waiting - start) / std::max<int64_t>(ran, 1));
    if (alone.count() > 0)
      alone_until_.store((end + alone).time_since_epoch().count(), std::memory_order_relaxed);
  }

  // Whether calls run on the caller alone for now (a helper lagged recently).
  bool alone() const {
    return SteadyClock::now().time_since_epoch().count() <
           alone_until_.load(std::memory_order_relaxed);
  }

 private:
  void grow(int helpers) {
    if (started_.load(std::memory_order_acquire) >= helpers) return;
    std::lock_guard<std::mutex> lock(mu_);
    while (int(helpers_.size()) < helpers) {
      const int index = int(helpers_.size());
      helpers_.emplace_back([this, index] { helper(index); });
      helpers_.back().detach();
    }
    started_.store(int(helpers_.size()), std::memory_order_release);
  }

  void helper(int index) {
    t_in_job = true;
    uint64_t seen = 0;
    for (;;) {
      const auto until = SteadyClock::now() + kSpin;
      while (epoch_.load(std::memory_order_acquire) == seen && SteadyClock::now() < until)
        for (int i = 0; i < 32; ++i) _mm_pause();
      std::shared_ptr<Job> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (epoch_.load() == seen) {
          sleeping_.fetch_add(1);
          cv_.wait(lock, [&] { return epoch_.load() != seen; });
          sleeping_.fetch_sub(1);
        }
        job = current_;
        seen = epoch_.load();
      }
      core::take_long_time_slice();  // a serving engine's helper: see core/time_slice.h
      if (index < job->helpers) job->work();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::thread> helpers_;  // detached: the pool lives until the process ends
  std::shared_ptr<Job> current_;
  std::atomic<uint64_t> epoch_{0};
  std::atomic<int> sleeping_{0};
  std::atomic<int> started_{0};  // helpers_.size(), read without the lock
  std::atomic<SteadyClock::rep> alone_until_{0};
};

}  // namespace

std::chrono::nanoseconds alone_after_lag(std::chrono::nanoseconds lag,
                                         std::chrono::nanoseconds per_item) {
  if (lag <= 4 * per_item + kLagSlack) return std::chrono::nanoseconds(0);
  return std::min<std::chrono::nanoseconds>(kAloneAtMost, kAlonePerLag * lag);
}

void parallel_claim(int64_t count, const std::function<void(int64_t)>& f, int threads) {
  if (threads <= 0) threads = omp_get_max_threads();
  threads = int(std::min<int64_t>(threads, count));
  if (threads <= 1 || t_in_job || omp_in_parallel()) {
    for (int64_t i = 0; i < count; ++i) f(i);
    return;
  }
  static Pool* pool = new Pool;  // never destroyed: helpers may still poll at exit
  if (pool->alone()) {
    for (int64_t i = 0; i < count; ++i) f(i);
    return;
  }
  t_in_job = true;
  struct Leave {
    ~Leave() { t_in_job = false; }
  } leave;
  pool->run(count, f, threads);
}

}  // namespace zenith::cpu
