// Collective communication between the ranks of a job (HCCL's role in the Ascend stack).
//
//   communication::init();                        // from RANK_ID/RANK_SIZE or RANK/WORLD_SIZE
//   communication::all_reduce(grad, communication::ReduceOp::AVG);
//   auto work = communication::all_reduce_async(bucket);   // overlaps with the caller
//   ...; work.wait();
//
// CPU tensors go through Gloo's TCP transport, CUDA tensors through NCCL where the build has it.
// Every collective must be called by every rank of its group, in the same order, with tensors of
// the same shape and dtype (checked, see Options::check_inputs). Tensors must be contiguous and
// float32, float64, int32 or int64; collectives work in place where natural.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "zenith/tensor.h"

namespace zenith::communication {

enum class ReduceOp { SUM, AVG, MAX, MIN };
const char* reduce_op_name(ReduceOp op);

struct Options {
  int rank = -1;  // -1: from RANK_ID / RANK
  int size = -1;  // -1: from RANK_SIZE / WORLD_SIZE / the rank table
  // Rendezvous store: "file:///dir", "redis://host:port", "tcp://host:port". Empty: ZENITH_STORE,
  // else tcp://MASTER_ADDR:MASTER_PORT (rank 0 serves it), else a file store next to
  // RANK_TABLE_FILE when the table has one server.
  std::string store;
  // Namespace of this job's keys in the store, so that reruns sharing a Redis server or a
  // directory do not read stale keys. Empty: ZENITH_STORE_PREFIX, else "zenith".
  std::string prefix;
  // Every collective fails after this long without progress. 0: ZENITH_COMM_TIMEOUT (seconds,
  // or with an "ms" suffix), else 60 s. Also bounds the rendezvous in init().
  std::chrono::milliseconds timeout{0};
  // Address this rank listens on. Empty: ZENITH_COMM_ADDR, else the rank table's device_ip,
  // else the host name when MASTER_ADDR is a remote host, else 127.0.0.1.
  std::string address;
  // Compare op, shape, dtype and root across ranks before each collective (one small message
  // per peer, one round trip), so mismatches raise the same clear error on every rank. Off,
  // ranks that disagree wait for each other and fail with the timeout instead (never with
  // corrupted data or a crash). ZENITH_COMM_CHECK=0 turns it off; unset: on.
  int check_inputs = -1;  // -1: from the environment, 0: off, 1: on
};

// Joins the job's ranks; reads everything not set from the environment the platform provides.
void init();
void init(const Options& options);
bool is_initialized();
// Leaves the group: a best-effort barrier, then closes connections and stops the comm threads.
void release();
int get_rank();
int get_group_size();

namespace detail {
struct GroupImpl;
struct WorkState;
}  // namespace detail

// A subset of the world's ranks with its own connections and its own communication thread.
// A default-constructed Group means the world.
class Group {
 public:
  Group() = default;
  explicit Group(std::shared_ptr<detail::GroupImpl> impl) : impl_(std::move(impl)) {}
  bool is_world() const { return impl_ == nullptr; }
  bool is_member() const;
  int rank() const;  // rank within the group; -1 when not a member
  int size() const;
  const std::vector<int>& ranks() const;  // world ranks, in group order
  const std::shared_ptr<detail::GroupImpl>& impl() const { return impl_; }

 private:
  std::shared_ptr<detail::GroupImpl> impl_;
};

// Every rank must call new_group with the same list, in the same order relative to other
// new_group calls, as in torch.distributed. Non-members get a Group they cannot use.
Group new_group(const std::vector<int>& ranks);

// Handle to an asynchronous collective; the tensors it uses stay alive until it completes.
class Work {
 public:
  Work() = default;
  explicit Work(std::shared_ptr<detail::WorkState> state) : state_(std::move(state)) {}
  // Blocks until done; rethrows the collective's error (timeouts included).
  void wait() const;
  bool is_completed() const;
  bool defined() const { return state_ != nullptr; }

 private:
  std::shared_ptr<detail::WorkState> state_;
};

// ---- collectives (blocking). Ranks in arguments (root) are world ranks.
// tensor <- op over ranks of tensor
void all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::SUM, const Group& group = {});
// tensor <- root's tensor
void broadcast(const Tensor& tensor, int root, const Group& group = {});
// outputs[i] <- rank i's input; outputs are preallocated, each like input. (A braced list of
// one tensor picks the overload below; pass a std::vector.)
void all_gather(const std::vector<Tensor>& outputs, const Tensor& input, const Group& group = {});
// output (numel = size * input numel) <- concatenation of every rank's input, in rank order.
void all_gather(const Tensor& output, const Tensor& input, const Group& group = {});
// Returns [size, *input.shape] with every rank's input.
Tensor all_gather(const Tensor& input, const Group& group = {});
// output <- block `rank` of op over ranks of input; input numel = size * output numel.
void reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op = ReduceOp::SUM,
                    const Group& group = {});
void barrier(const Group& group = {});

// ---- asynchronous variants: queued on the group's communication thread, in call order.
Work all_reduce_async(const Tensor& tensor, ReduceOp op = ReduceOp::SUM, const Group& group = {});
Work broadcast_async(const Tensor& tensor, int root, const Group& group = {});
Work all_gather_async(const std::vector<Tensor>& outputs, const Tensor& input,
                      const Group& group = {});
Work all_gather_async(const Tensor& output, const Tensor& input, const Group& group = {});
Work reduce_scatter_async(const Tensor& output, const Tensor& input, ReduceOp op = ReduceOp::SUM,
                          const Group& group = {});
Work barrier_async(const Group& group = {});

// ---- per-process counters, for job metrics.
struct OpStats {
  uint64_t calls = 0;
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  double seconds = 0;  // wall time spent executing on the communication threads
};
struct Stats {
  uint64_t calls = 0;
  uint64_t bytes_sent = 0;      // payload bytes this process sent to peers
  uint64_t bytes_received = 0;  // payload bytes this process received from peers
  double seconds = 0;           // wall time in collectives (async ones included)
  uint64_t failures = 0;
  std::map<std::string, OpStats> by_op;  // "all_reduce", "broadcast", ...
};
Stats stats();
void reset_stats();

}  // namespace zenith::communication
