#include "serve/batcher.h"

#include <algorithm>
#include <cstring>
#include <exception>

namespace zenith::serve {

using Clock = std::chrono::steady_clock;

Batcher::Batcher(BatchOptions options, int64_t sample_numel, RunFn run, ObserveFn observe)
    : options_(options),
      sample_numel_(sample_numel),
      run_(std::move(run)),
      observe_(std::move(observe)) {
  options_.max_batch = std::max(1, options_.max_batch);
  options_.max_queue = std::max(1, options_.max_queue);
  options_.replicas = std::max(1, options_.replicas);
  for (int r = 0; r < options_.replicas; ++r) workers_.emplace_back([this, r] { work(r); });
}

Batcher::~Batcher() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
  for (auto& r : queue_) r->promise.set_value({{}, 0, "[serve] shutting down", 0, 0});
}

std::shared_ptr<BatchRequest> Batcher::submit(std::vector<float> input, int64_t n) {
  auto req = std::make_shared<BatchRequest>();
  req->input = std::move(input);
  req->n = n;
  req->enqueued = Clock::now();
  {
    std::lock_guard lock(mutex_);
    if (stop_ || int(queue_.size()) >= options_.max_queue) return nullptr;
    queue_.push_back(req);
    queued_samples_ += n;
  }
  cv_.notify_all();
  return req;
}

int Batcher::queue_depth() const {
  std::lock_guard lock(mutex_);
  return int(queue_.size());
}

void Batcher::work(int replica) {
  const auto max_delay = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double, std::milli>(options_.max_delay_ms));
  for (;;) {
    std::vector<std::shared_ptr<BatchRequest>> batch;
    int64_t samples = 0;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      // Under concurrent load (the last run or the queue holds more than one request), wait for
      // more until the batch is full or the oldest request's delay is used up. A lone request
      // on an idle service runs at once: waiting could only add latency.
      // The wait also ends once no request has arrived for a fifth of the delay: the clients
      // that were going to join this batch have joined.
      const bool loaded = last_batch_requests_ > 1 || queue_.size() > 1;
      const auto deadline = queue_.front()->enqueued + max_delay;
      const auto gap = max_delay / 5;
      while (loaded && !stop_ && !queue_.empty() && queued_samples_ < options_.max_batch) {
        const auto now = Clock::now();
        const auto quiet_until = queue_.back()->enqueued + gap;
        if (now >= deadline || now >= quiet_until) break;
        cv_.wait_until(lock, std::min(deadline, quiet_until));
      }
      if (stop_) return;
      while (!queue_.empty()) {
        auto& next = queue_.front();
        if (next->abandoned) {
          queued_samples_ -= next->n;
          queue_.pop_front();
          continue;
        }
        if (!batch.empty() && samples + next->n > options_.max_batch) break;
        samples += next->n;
        queued_samples_ -= next->n;
        batch.push_back(std::move(next));
        queue_.pop_front();
      }
      if (!batch.empty()) last_batch_requests_ = int(batch.size());
    }
    if (batch.empty()) continue;
    const auto start = Clock::now();
    std::vector<double> queue_s;
    std::vector<float> input;
    input.reserve(size_t(samples * sample_numel_));
    for (const auto& r : batch) {
      queue_s.push_back(std::chrono::duration<double>(start - r->enqueued).count());
      input.insert(input.end(), r->input.begin(), r->input.end());
    }
    std::vector<float> output;
    int64_t width = 0;
    std::string error;
    try {
      output = run_(replica, input, samples, &width);
    } catch (const std::exception& e) {
      error = e.what();
    }
    if (observe_) observe_(int(samples), queue_s);
    int64_t row = 0;
    for (size_t i = 0; i < batch.size(); ++i) {
      BatchResult result;
      result.width = width;
      result.error = error;
      result.queue_seconds = queue_s[i];
      result.batch_size = int(samples);
      if (error.empty())
        result.outputs.assign(output.begin() + row * width,
                              output.begin() + (row + batch[i]->n) * width);
      row += batch[i]->n;
      batch[i]->promise.set_value(std::move(result));
    }
  }
}

}  // namespace zenith::serve
