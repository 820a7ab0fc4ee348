#include "distributed/group.h"

#include <gloo/context.h>

#include <cstring>
#include <map>
#include <sstream>

#include "distributed/stats.h"
#include "zenith/error.h"

namespace zenith::communication::detail {

namespace {

const char* const kOpNames[] = {"?",          "all_reduce",     "broadcast",
                                "all_gather", "reduce_scatter", "barrier"};

uint32_t op_index(const char* op) {
  for (uint32_t i = 1; i < std::size(kOpNames); ++i)
    if (std::strcmp(kOpNames[i], op) == 0) return i;
  return 0;
}

// Thrown when ranks disagree on a collective; nothing was sent, so the group stays usable.
struct MismatchError : Error {
  using Error::Error;
};

// Every rank sends its signature to every other rank (one round trip), so every rank sees the
// same mismatch and raises the same error.
void check_signatures(distributed::PeerIo& io, const Signature& mine,
                      const std::vector<int>& ranks) {
  const int n = io.size(), r = io.rank();
  if (n == 1) return;
  std::vector<Signature> theirs(static_cast<size_t>(n));
  theirs[size_t(r)] = mine;
  std::vector<distributed::PeerIo::Transfer> transfers;
  // One fixed tag: signature exchanges complete before anything else is sent, and a fixed tag
  // lets ranks that disagree on the sequence number still see each other's signatures.
  const uint32_t tag = distributed::make_tag(distributed::Phase::check, 0, 0);
  for (int p = 0; p < n; ++p) {
    if (p == r) continue;
    transfers.push_back(io.recv(p, &theirs[size_t(p)], sizeof(Signature), tag));
    transfers.push_back(io.send(p, &mine, sizeof(Signature), tag));
  }
  io.wait_all(transfers);
  bool same = true;
  for (const auto& s : theirs) same = same && std::memcmp(&s, &mine, sizeof(Signature)) == 0;
  if (same) return;
  // Group ranks by what they asked for: "ranks 0, 2: ...; rank 1: ...".
  std::map<std::string, std::vector<int>> by_call;
  for (int p = 0; p < n; ++p) by_call[theirs[size_t(p)].describe()].push_back(ranks[size_t(p)]);
  std::ostringstream os;
  os << "[communication] " << kOpNames[mine.op]
     << ": ranks called different collectives (every rank of a group must make the same calls "
        "in the same order, with the same shapes and dtypes): ";
  bool first = true;
  for (const auto& [call, who] : by_call) {
    os << (first ? "" : "; ") << (who.size() > 1 ? "ranks " : "rank ");
    for (size_t i = 0; i < who.size(); ++i) os << (i ? "," : "") << who[i];
    os << " " << call;
    first = false;
  }
  throw MismatchError(os.str());
}

}  // namespace

void Worker::post(std::shared_ptr<WorkState> work) {
  std::lock_guard<std::mutex> lock(mutex_);
  ZENITH_CHECK(!stopping_, "[communication] group released; no more collectives");
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  queue_.push_back(std::move(work));
  cv_.notify_all();
}

void Worker::run(std::shared_ptr<WorkState> work) {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    ZENITH_CHECK(!stopping_, "[communication] group released; no more collectives");
    if (running_ || !queue_.empty()) {
      lock.unlock();
      post(work);
      std::unique_lock<std::mutex> wait_lock(work->mutex);
      work->cv.wait(wait_lock, [&] { return work->done; });
      return;
    }
    running_ = true;
  }
  execute(*work);
  std::lock_guard<std::mutex> lock(mutex_);
  running_ = false;
  cv_.notify_all();  // the worker thread may have work queued meanwhile
}

void Worker::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

void Worker::execute(WorkState& work) {
  std::exception_ptr error;
  try {
    work.run();
  } catch (...) {
    error = std::current_exception();
  }
  std::lock_guard<std::mutex> lock(work.mutex);
  work.error = error;
  work.done = true;
  work.keep_alive.clear();
  work.run = nullptr;
  work.cv.notify_all();
}

void Worker::loop() {
  for (;;) {
    std::shared_ptr<WorkState> work;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return (stopping_ && !running_) || (!queue_.empty() && !running_); });
      if (queue_.empty()) return;  // stopping, and everything queued has run
      work = std::move(queue_.front());
      queue_.pop_front();
      running_ = true;
    }
    execute(*work);
    std::lock_guard<std::mutex> lock(mutex_);
    running_ = false;
    cv_.notify_all();
  }
}

std::string Signature::describe() const {
  std::ostringstream os;
  os << (op < std::size(kOpNames) ? kOpNames[op] : "?");
  if (reduce_op >= 0) os << "(" << reduce_op_name(ReduceOp(reduce_op)) << ")";
  if (root >= 0) os << "(root " << root << ")";
  if (dtype >= 0) {
    os << " of " << dtype_name(DType(dtype)) << " [";
    if (ndim <= 8) {
      for (int i = 0; i < ndim; ++i) os << (i ? ", " : "") << dims[i];
    } else {
      os << numel << " elements";
    }
    os << "]";
  }
  os << " as collective #" << seq;
  return os.str();
}

uint16_t Signature::hash() const {
  Signature s = *this;
  s.seq = 0;
  uint32_t h = 2166136261u;  // FNV-1a
  const auto* p = reinterpret_cast<const unsigned char*>(&s);
  for (size_t i = 0; i < sizeof s; ++i) h = (h ^ p[i]) * 16777619u;
  return uint16_t(h ^ (h >> 16));
}

Signature make_signature(const char* op, const Tensor* t, int reduce_op, int root) {
  Signature s;
  s.op = op_index(op);
  s.reduce_op = reduce_op;
  s.root = root;
  if (t) {
    s.dtype = int32_t(t->dtype());
    s.ndim = int32_t(t->dim());
    s.numel = t->numel();
    for (int i = 0; i < s.ndim && i < 8; ++i) s.dims[i] = t->shape()[size_t(i)];
  }
  return s;
}

Work GroupImpl::submit(const char* op, Signature signature, std::vector<Tensor> keep_alive,
                       std::function<void(distributed::PeerIo&)> body, bool blocking) {
  auto work = std::make_shared<WorkState>();
  work->keep_alive = std::move(keep_alive);
  work->blocked_nanos = blocked_nanos;
  work->run = [this, op, signature, body = std::move(body)]() mutable {
    ZENITH_CHECK(broken.empty(), "[communication] ", op, ": ", name,
                 " is unusable after an earlier failure (", broken,
                 "); call release() and init() again");
    ZENITH_CHECK(context != nullptr, "[communication] ", op, ": ", name, " was released");
    signature.seq = ++seq;
    const auto start = distributed::Clock::now();
    distributed::PeerIo io(*context, ranks, op, seq, signature.hash(), check_inputs, timeout);
    auto record = [&](bool failed_call) {
      const double seconds = distributed::seconds_since(start);
      distributed::record_collective(op, io.bytes_sent(), io.bytes_received(), seconds,
                                     failed_call);
      traffic_calls += 1;
      traffic_sent += io.bytes_sent();
      traffic_received += io.bytes_received();
      traffic_nanos += int64_t(seconds * 1e9);
    };
    try {
      if (check_inputs) check_signatures(io, signature, ranks);
      body(io);
    } catch (const MismatchError&) {
      record(true);
      throw;
    } catch (const std::exception& e) {
      broken = e.what();
      failed = true;
      if (size() > 1) context->closeConnections();  // a group of one has no transport
      record(true);
      throw;
    }
    record(false);
  };
  if (!blocking) {
    worker.post(work);
    return Work(work);
  }
  const auto start = distributed::Clock::now();  // queued work, the signature check, the transfers
  worker.run(work);
  *blocked_nanos += int64_t(distributed::seconds_since(start) * 1e9);
  return Work(work);
}

void GroupImpl::close() {
  worker.stop();
  nccl.reset();
  context.reset();
}

}  // namespace zenith::communication::detail

namespace zenith::communication {

void Work::wait() const {
  ZENITH_CHECK(state_ != nullptr, "[communication] wait() on an empty Work");
  std::unique_lock<std::mutex> lock(state_->mutex);
  if (!state_->done) {
    const auto start = distributed::Clock::now();
    state_->cv.wait(lock, [&] { return state_->done; });
    if (state_->blocked_nanos)
      *state_->blocked_nanos += int64_t(distributed::seconds_since(start) * 1e9);
  }
  if (state_->error) std::rethrow_exception(state_->error);
}

bool Work::is_completed() const {
  if (!state_) return true;
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->done;
}

}  // namespace zenith::communication
