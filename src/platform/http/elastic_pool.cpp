#include "platform/http/elastic_pool.h"

#include <algorithm>
#include <chrono>

namespace zenith::platform {

ElasticPool::ElasticPool(std::size_t max_threads, double idle_s)
    : max_(std::max(kKeptThreads, max_threads)), idle_(idle_s) {}

void ElasticPool::enqueue(std::function<void()> fn) {
  std::lock_guard lock(mutex_);
  jobs_.push_back(std::move(fn));
  if (jobs_.size() > waiting_ && threads_.size() < max_) {
    std::thread t([this] { work(); });
    const auto id = t.get_id();
    threads_.emplace(id, std::move(t));
  }
  cv_.notify_one();
}

void ElasticPool::shutdown() {
  std::map<std::thread::id, std::thread> threads;
  std::vector<std::thread> ended;
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
    threads.swap(threads_);
    ended.swap(ended_);
  }
  cv_.notify_all();
  for (auto& [id, t] : threads) t.join();
  for (auto& t : ended) t.join();
}

void ElasticPool::work() {
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock lock(mutex_);
      ++waiting_;
      const bool woken = cv_.wait_for(lock, std::chrono::duration<double>(idle_),
                                      [&] { return stopping_ || !jobs_.empty(); });
      --waiting_;
      if (stopping_ && jobs_.empty()) return;  // shutdown() joins this thread
      if (!woken) {
        if (threads_.size() <= kKeptThreads) continue;
        // Idle too long: hand this thread's handle to the next one that ends (or to
        // shutdown()) to join, and join the one handed over before.
        auto self = threads_.extract(std::this_thread::get_id());
        std::vector<std::thread> previous;
        previous.swap(ended_);
        ended_.push_back(std::move(self.mapped()));
        lock.unlock();
        for (auto& t : previous) t.join();
        return;
      }
      fn = std::move(jobs_.front());
      jobs_.pop_front();
    }
    fn();
  }
}

}  // namespace zenith::platform
