// A communication group: its Gloo context (CPU), its NCCL communicator (CUDA, made on first
// use), and the thread that runs its collectives in call order.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "distributed/algorithms.h"
#include "distributed/nccl_backend.h"
#include "distributed/store.h"
#include "zenith/communication.h"

namespace gloo {
class Context;
}

namespace zenith::communication::detail {

struct WorkState {
  std::function<void()> run;
  std::vector<Tensor> keep_alive;  // the collective's tensors, until it completes
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr error;
  // The group's blocked-time counter (GroupImpl::blocked_nanos): Work::wait adds its wait.
  std::shared_ptr<std::atomic<int64_t>> blocked_nanos;
};

// Runs a group's work strictly in submission order: on its own thread (async work), or on the
// caller's thread when nothing is queued or running (blocking calls skip two thread switches).
// The destructor runs what is queued, then joins.
class Worker {
 public:
  Worker() = default;
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;
  ~Worker() { stop(); }
  void post(std::shared_ptr<WorkState> work);
  // Runs `work` here if the worker is idle, else queues it; returns once it has completed.
  void run(std::shared_ptr<WorkState> work);
  void stop();

 private:
  void loop();
  static void execute(WorkState& work);

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<WorkState>> queue_;
  bool running_ = false;  // some thread is executing work of this group
  bool stopping_ = false;
  std::thread thread_;
};

// What each rank is about to run; compared across ranks before the collective starts.
struct Signature {
  uint32_t magic = 0x5a434f4d;  // "ZCOM"
  uint32_t op = 0;              // index into kOpNames
  uint64_t seq = 0;
  int32_t reduce_op = -1;
  int32_t root = -1;
  int32_t dtype = -1;
  int32_t ndim = 0;
  int64_t numel = 0;
  int64_t dims[8] = {};
  std::string describe() const;
  uint16_t hash() const;  // of everything but seq: equal calls, equal hashes
};
Signature make_signature(const char* op, const Tensor* t, int reduce_op = -1, int root = -1);

struct GroupImpl {
  std::string name;        // "world", "group 1": key namespace and messages
  std::vector<int> ranks;  // world ranks, in group order
  int rank = -1;           // this process's rank in the group; -1 when not a member
  std::chrono::milliseconds timeout{60000};
  bool check_inputs = true;
  std::unique_ptr<distributed::Store> store;  // this group's keys (NCCL ids)
  std::shared_ptr<gloo::Context> context;     // null for non-members and after release

  std::atomic<bool> failed{false};  // set with `broken`, readable from any thread
  // This group's traffic since it was made (distributed::group_traffic), any thread may read.
  std::atomic<uint64_t> traffic_calls{0}, traffic_sent{0}, traffic_received{0};
  std::atomic<int64_t> traffic_nanos{0};
  // Time callers spent blocked on this group: a blocking collective's whole call, an async
  // one's Work::wait(). Shared with the Work handles, which may outlive the group.
  std::shared_ptr<std::atomic<int64_t>> blocked_nanos = std::make_shared<std::atomic<int64_t>>(0);

  // Touched by the worker thread only.
  uint64_t seq = 0;
  std::string broken;  // the failure that closed this group's connections
  distributed::Scratch scratch;
  distributed::NcclCommPtr nccl;
  int nccl_device = -1;

  Worker worker;  // declared last: destroyed (drained and joined) first

  int size() const { return int(ranks.size()); }
  // Queues `body` on the worker; it runs with the group's next sequence number, after the
  // cross-rank signature check, and records stats. Errors other than a signature mismatch
  // close the group's connections, so peers fail fast instead of waiting for their timeout.
  // With `blocking`, returns after the work completed (possibly run on this thread).
  Work submit(const char* op, Signature signature, std::vector<Tensor> keep_alive,
              std::function<void(distributed::PeerIo&)> body, bool blocking = false);
  void close();  // stops the worker, then drops the connections
};

}  // namespace zenith::communication::detail
