// Connections on threads made as they are needed, up to a cap (then they wait in line); a
// thread idle for `idle_s` ends, down to kKeptThreads, so a burst does not pin its threads.
// GuardedServer's task queue (http_guard.h).
#pragma once

#include <httplib.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace zenith::platform {

class ElasticPool final : public httplib::TaskQueue {
 public:
  ElasticPool(std::size_t max_threads, double idle_s);
  ~ElasticPool() override { shutdown(); }

  void enqueue(std::function<void()> fn) override;
  void shutdown() override;

 private:
  static constexpr std::size_t kKeptThreads = 4;

  void work();

  const std::size_t max_;
  const double idle_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::map<std::thread::id, std::thread> threads_;
  std::vector<std::thread> ended_;  // threads that ended idle, not yet joined
  std::size_t waiting_ = 0;
  bool stopping_ = false;
};

}  // namespace zenith::platform
