// Dynamic batching: requests queue up and worker threads (one per replica) run them together,
// up to `max_batch` samples or until the oldest has waited `max_delay_ms`, then answer each
// request with its own rows. The delay applies under concurrent load only (the previous run or
// the queue held more than one request): a lone request on an idle service runs at once, and
// the wait ends early once no request has arrived for a fifth of the delay. A full queue refuses
// new requests (the server answers 429); a caller that stops waiting marks its request abandoned
// and the workers skip it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace zenith::serve {

struct BatchOptions {
  int max_batch = 32;       // samples per model run (1: batching off)
  double max_delay_ms = 5;  // how long the oldest request may wait for others (under load)
  int max_queue = 256;      // requests waiting; more are refused
  int replicas = 1;         // worker threads, each with its own copy of the network
};

struct BatchResult {
  std::vector<float> outputs;  // n x width, row-major
  int64_t width = 0;
  std::string error;  // the model failed; empty on success
  double queue_seconds = 0;
  int batch_size = 0;  // samples in the run that answered this request
};

struct BatchRequest {
  std::vector<float> input;  // n samples, each sample_numel floats
  int64_t n = 0;
  std::chrono::steady_clock::time_point enqueued;
  std::promise<BatchResult> promise;
  std::atomic<bool> abandoned{false};
};

class Batcher {
 public:
  // Runs `n` samples (n x sample_numel floats) on replica `replica`; returns n x width floats
  // and sets width. Called from the worker threads, one call at a time per replica.
  using RunFn = std::function<std::vector<float>(int replica, const std::vector<float>& input,
                                                 int64_t n, int64_t* width)>;
  // Called after each run with its size and each request's queue time.
  using ObserveFn = std::function<void(int batch_samples, const std::vector<double>& queue_s)>;

  Batcher(BatchOptions options, int64_t sample_numel, RunFn run, ObserveFn observe = nullptr);
  ~Batcher();
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // Queues a request; nullptr when the queue is full.
  std::shared_ptr<BatchRequest> submit(std::vector<float> input, int64_t n);
  int queue_depth() const;
  const BatchOptions& options() const { return options_; }

 private:
  void work(int replica);
  BatchOptions options_;
  int64_t sample_numel_;
  RunFn run_;
  ObserveFn observe_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<BatchRequest>> queue_;
  int64_t queued_samples_ = 0;
  int last_batch_requests_ = 0;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace zenith::serve
