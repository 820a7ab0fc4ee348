#include "distributed/peer_io.h"

#include <gloo/common/error.h>
#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include "zenith/error.h"

namespace zenith::distributed {

uint32_t make_tag(Phase phase, size_t step, size_t segment) {
  ZENITH_CHECK(step < (1u << 12) && segment < (1u << 16),
               "[communication] collective too large to tag (step ", step, ", segment ", segment,
               ")");
  return (uint32_t(phase) << 28) | (uint32_t(step) << 16) | uint32_t(segment);
}

PeerIo::PeerIo(gloo::Context& context, const std::vector<int>& world_ranks, std::string op_name,
               uint64_t seq, uint16_t call_hash, bool checked, std::chrono::milliseconds timeout)
    : context_(context),
      world_ranks_(world_ranks),
      op_name_(std::move(op_name)),
      seq_(seq),
      call_hash_(call_hash),
      checked_(checked),
      rank_(context.rank),
      size_(context.size),
      timeout_(timeout),
      start_(Clock::now()),
      deadline_(start_ + timeout) {}

PeerIo::~PeerIo() = default;

uint64_t PeerIo::slot(uint32_t tag) const {
  // The input check itself must match across disagreeing ranks: a fixed slot. Otherwise
  // 16 bits of sequence number (collectives of a group run one at a time, so wrapping is
  // harmless), 16 bits of call hash, 32 bits of tag.
  if ((tag >> 28) == uint32_t(Phase::check)) return tag;
  return ((seq_ & 0xffff) << 48) | (uint64_t(call_hash_) << 32) | tag;
}

PeerIo::Transfer PeerIo::send(int peer, const void* data, size_t nbytes, uint32_t tag) {
  Transfer t{nullptr, peer, true, nbytes};
  if (nbytes == 0) return t;
  // Gloo's buffers take non-const pointers for both directions; sends only read.
  t.buffer = context_.createUnboundBuffer(const_cast<void*>(data), nbytes);
  try {
    t.buffer->send(peer, slot(tag));
  } catch (const std::exception& e) {
    fail(t, e.what());
  }
  bytes_sent_ += nbytes;
  return t;
}

PeerIo::Transfer PeerIo::recv(int peer, void* data, size_t nbytes, uint32_t tag) {
  Transfer t{nullptr, peer, false, nbytes};
  if (nbytes == 0) return t;
  t.buffer = context_.createUnboundBuffer(data, nbytes);
  try {
    t.buffer->recv(peer, slot(tag));
  } catch (const std::exception& e) {
    fail(t, e.what());
  }
  return t;
}

void PeerIo::wait(Transfer& t) {
  if (!t.buffer) return;
  // Gloo reports a timeout for anything under a millisecond; keep at least one so an expired
  // deadline still goes through Gloo's timeout path (which closes this context's connections).
  const auto left =
      std::max(std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now()),
               std::chrono::milliseconds(1));
  try {
    if (t.is_send)
      t.buffer->waitSend(left);
    else
      t.buffer->waitRecv(left);
  } catch (const std::exception& e) {
    fail(t, e.what());
  }
  if (!t.is_send) bytes_received_ += t.nbytes;
  t.buffer.reset();
}

void PeerIo::wait_all(std::vector<Transfer>& ts) {
  for (auto& t : ts) wait(t);
}

void PeerIo::fail(const Transfer& t, const std::string& gloo_message) {
  const int world_peer = world_ranks_.empty() ? t.peer : world_ranks_[size_t(t.peer)];
  // Gloo prefixes its messages with "[file:line] "; users need only the text.
  std::string detail = gloo_message;
  if (!detail.empty() && detail[0] == '[') {
    auto close = detail.find("] ");
    if (close != std::string::npos) detail = detail.substr(close + 2);
  }
  if (detail.find("Timed out waiting") != std::string::npos)
    ZENITH_FAIL("[communication] ", op_name_, " timed out after ", format_seconds(timeout_),
                " waiting for rank ", world_peer,
                checked_ ? " (peer dead, hung or closed connection? the timeout is "
                           "ZENITH_COMM_TIMEOUT)"
                         : " (peer dead, hung, closed connection, or it called a different "
                           "collective: ZENITH_COMM_CHECK=1 compares calls across ranks)");
  ZENITH_FAIL("[communication] ", op_name_, " failed after ", format_seconds(Clock::now() - start_),
              ": connection to rank ", world_peer, " lost (", detail,
              "; the peer exited or gave up on an earlier error)");
}

}  // namespace zenith::distributed
