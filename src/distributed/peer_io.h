// Point-to-point messages of one collective over a Gloo context: posts sends and receives on
// Gloo unbound buffers and waits for them against the collective's deadline, so that every
// failure names the collective, the peer and the time it waited.
#pragma once

#include <gloo/transport/unbound_buffer.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "distributed/util.h"

namespace gloo {
class Context;
}

namespace zenith::distributed {

// Message tags inside one collective: which phase, which step, which segment.
enum class Phase : uint32_t {
  check = 1,
  reduce_scatter = 2,
  all_gather = 3,
  broadcast = 4,
  barrier = 5,
  exchange = 6,
};
uint32_t make_tag(Phase phase, size_t step, size_t segment);

class PeerIo {
 public:
  // `world_ranks` maps group ranks to world ranks, for messages. Message slots carry `seq` (the
  // collective's number in its group) and `call_hash` (what the rank asked for), so messages of
  // different collectives never match: ranks that disagree wait and time out rather than
  // receive a message of the wrong size (which Gloo answers by aborting the process).
  // `checked`: whether inputs were compared across ranks first (changes the timeout hint).
  PeerIo(gloo::Context& context, const std::vector<int>& world_ranks, std::string op_name,
         uint64_t seq, uint16_t call_hash, bool checked, std::chrono::milliseconds timeout);
  ~PeerIo();
  PeerIo(const PeerIo&) = delete;
  PeerIo& operator=(const PeerIo&) = delete;

  // A posted message; wait for it with PeerIo::wait. Zero-byte messages are never sent.
  struct Transfer {
    std::unique_ptr<gloo::transport::UnboundBuffer> buffer;
    int peer = -1;
    bool is_send = false;
    size_t nbytes = 0;
  };

  int rank() const { return rank_; }
  int size() const { return size_; }
  Transfer send(int peer, const void* data, size_t nbytes, uint32_t tag);
  Transfer recv(int peer, void* data, size_t nbytes, uint32_t tag);
  void wait(Transfer& t);
  void wait_all(std::vector<Transfer>& ts);

  // Traffic that did not go through this object (NCCL), for the stats.
  void count(uint64_t sent, uint64_t received) {
    bytes_sent_ += sent;
    bytes_received_ += received;
  }
  uint64_t bytes_sent() const { return bytes_sent_; }
  uint64_t bytes_received() const { return bytes_received_; }
  const std::string& op_name() const { return op_name_; }

 private:
  [[noreturn]] void fail(const Transfer& t, const std::string& gloo_message);

  gloo::Context& context_;
  const std::vector<int>& world_ranks_;
  std::string op_name_;
  uint64_t slot(uint32_t tag) const;

  uint64_t seq_;
  uint16_t call_hash_;
  bool checked_;
  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  Clock::time_point start_;
  Clock::time_point deadline_;
  uint64_t bytes_sent_ = 0;
  uint64_t bytes_received_ = 0;
};

}  // namespace zenith::distributed
