// The prefetching iterator: worker threads compute items ahead of the consumer into a bounded
// reorder buffer; the consumer takes them strictly in index order.
#include <chrono>
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include "zenith/autograd.h"
#include "zenith/context.h"
#include "zenith/data.h"

namespace zenith::dataset {

struct Iterator::State {
  NodePtr node;
  int64_t epoch = 0;
  int64_t size = 0;
  int64_t capacity = 1;  // items computed or in flight ahead of the consumer

  std::mutex mutex;
  std::condition_variable ready;  // an item finished, or stop
  std::condition_variable space;  // the consumer took an item, or stop
  int64_t next_index = 0;         // next item a worker claims
  int64_t consumed = 0;           // next item the consumer returns
  bool stop = false;
  struct Result {
    Row row;
    std::exception_ptr error;
  };
  std::map<int64_t, Result> done;
  double wait_seconds = 0;
  std::vector<std::thread> workers;

  void work() {
    // Data threads stay off the compute pool and record no autograd history.
    context::set_num_threads(1);
    NoGradGuard no_grad;
    for (;;) {
      int64_t index;
      {
        std::unique_lock<std::mutex> lock(mutex);
        space.wait(lock,
                   [&] { return stop || next_index >= size || next_index < consumed + capacity; });
        if (stop || next_index >= size) return;
        index = next_index++;
      }
      Result r;
      try {
        r.row = node->get(index, epoch);
      } catch (...) {
        r.error = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(mutex);
      done.emplace(index, std::move(r));
      ready.notify_all();
    }
  }

  ~State() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stop = true;
    }
    space.notify_all();
    ready.notify_all();
    for (auto& t : workers) t.join();
  }
};

Iterator::Iterator(NodePtr node, int64_t epoch, int num_workers, int prefetch, int64_t start)
    : state_(std::make_unique<State>()) {
  ZENITH_CHECK(num_workers > 0 && prefetch > 0, "[iterator] need positive workers and prefetch");
  state_->node = std::move(node);
  state_->epoch = epoch;
  state_->size = state_->node->size();
  ZENITH_CHECK(start >= 0 && start <= state_->size, "[iterator] start ", start,
               " out of range [0, ", state_->size, "]");
  state_->next_index = state_->consumed = start;
  state_->capacity = int64_t(num_workers) * prefetch;
  int threads = int(std::min<int64_t>(num_workers, std::max<int64_t>(state_->size - start, 1)));
  for (int i = 0; i < threads; ++i) state_->workers.emplace_back([s = state_.get()] { s->work(); });
}

Iterator::~Iterator() = default;
Iterator::Iterator(Iterator&&) noexcept = default;
Iterator& Iterator::operator=(Iterator&&) noexcept = default;

std::optional<Row> Iterator::next() {
  State& s = *state_;
  std::unique_lock<std::mutex> lock(s.mutex);
  if (s.consumed >= s.size) return std::nullopt;
  auto it = s.done.find(s.consumed);
  if (it == s.done.end()) {
    auto start = std::chrono::steady_clock::now();
    s.ready.wait(lock, [&] { return (it = s.done.find(s.consumed)) != s.done.end(); });
    s.wait_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  State::Result r = std::move(it->second);
  s.done.erase(it);
  ++s.consumed;
  lock.unlock();
  s.space.notify_all();
  if (r.error) std::rethrow_exception(r.error);
  return std::move(r.row);
}

int64_t Iterator::size() const { return state_->size; }

int64_t Iterator::position() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->consumed;
}

double Iterator::wait_seconds() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->wait_seconds;
}

}  // namespace zenith::dataset
