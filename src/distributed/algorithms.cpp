#include "distributed/algorithms.h"

#include <algorithm>
#include <cstring>

#include "distributed/reduce.h"

namespace zenith::distributed {

namespace {

using communication::ReduceOp;
using Transfer = PeerIo::Transfer;

// Large blocks travel in segments so that reducing one overlaps receiving the next.
constexpr size_t kSegmentBytes = size_t(1) << 20;
constexpr size_t kInflight = 2;
// Up to this size one all-to-all round beats the ring's 2(n-1) dependent steps.
constexpr size_t kDirectAllReduceBytes = size_t(64) << 10;

int mod(int a, int n) { return ((a % n) + n) % n; }

// Element range of block i when `count` elements are split over n ranks.
struct Blocks {
  size_t count;
  int n;
  size_t begin(int i) const {
    const size_t base = count / size_t(n), extra = count % size_t(n);
    return size_t(i) * base + std::min(size_t(i), extra);
  }
  size_t length(int i) const { return count / size_t(n) + (size_t(i) < count % size_t(n)); }
};

size_t segments(size_t nbytes) { return (nbytes + kSegmentBytes - 1) / kSegmentBytes; }

std::vector<Transfer> send_segments(PeerIo& io, int peer, const char* src, size_t nbytes,
                                    Phase phase, size_t step) {
  std::vector<Transfer> sends;
  for (size_t j = 0, n = segments(nbytes); j < n; ++j) {
    const size_t off = j * kSegmentBytes;
    sends.push_back(
        io.send(peer, src + off, std::min(kSegmentBytes, nbytes - off), make_tag(phase, step, j)));
  }
  return sends;
}

// dst = a op (what `peer` sends), `nbytes` long, received segment by segment into scratch.
void recv_reduce(PeerIo& io, int peer, char* dst, const char* a, size_t nbytes, DType dtype,
                 ReduceOp op, Phase phase, size_t step, char* scratch) {
  const size_t n = segments(nbytes), esize = itemsize(dtype);
  std::vector<Transfer> slots(kInflight);
  auto post = [&](size_t j) {
    const size_t off = j * kSegmentBytes;
    slots[j % kInflight] = io.recv(peer, scratch + (j % kInflight) * kSegmentBytes,
                                   std::min(kSegmentBytes, nbytes - off), make_tag(phase, step, j));
  };
  for (size_t j = 0; j < std::min(kInflight, n); ++j) post(j);
  for (size_t j = 0; j < n; ++j) {
    io.wait(slots[j % kInflight]);
    const size_t off = j * kSegmentBytes, len = std::min(kSegmentBytes, nbytes - off);
    reduce(dst + off, a + off, scratch + (j % kInflight) * kSegmentBytes, len / esize, dtype, op);
    if (j + kInflight < n) post(j + kInflight);
  }
}

// Every rank sends its tensor to every other rank and reduces all n in rank order, so all
// ranks compute bit-identical results.
void all_reduce_direct(PeerIo& io, char* data, size_t count, DType dtype, ReduceOp op,
                       Scratch& scratch) {
  const int n = io.size(), r = io.rank();
  const size_t bytes = count * itemsize(dtype);
  char* all = scratch.get(3, size_t(n) * bytes);
  std::memcpy(all + size_t(r) * bytes, data, bytes);
  std::vector<Transfer> transfers;
  for (int p = 0; p < n; ++p) {
    if (p == r) continue;
    transfers.push_back(
        io.recv(p, all + size_t(p) * bytes, bytes, make_tag(Phase::exchange, 0, 0)));
    transfers.push_back(io.send(p, data, bytes, make_tag(Phase::exchange, 0, 0)));
  }
  io.wait_all(transfers);
  reduce(data, all, all + bytes, count, dtype, op);
  for (int p = 2; p < n; ++p) reduce(data, data, all + size_t(p) * bytes, count, dtype, op);
  if (op == ReduceOp::AVG) divide(data, count, dtype, n);
}

}  // namespace

void all_reduce(PeerIo& io, char* data, size_t count, DType dtype, ReduceOp op, Scratch& scratch) {
  const int n = io.size(), r = io.rank();
  const size_t esize = itemsize(dtype);
  if (count == 0) return;  // nothing to send: every rank agrees, the check already ran
  if (n > 1 && count * esize <= kDirectAllReduceBytes) {
    all_reduce_direct(io, data, count, dtype, op, scratch);
  } else if (n > 1) {
    const Blocks blocks{count, n};
    const int right = mod(r + 1, n), left = mod(r - 1, n);
    char* segs = scratch.get(0, kInflight * kSegmentBytes);
    // Reduce-scatter: after step s this rank holds block r-s-2 reduced over s+2 ranks; the
    // last step completes block r.
    for (int s = 0; s + 1 < n; ++s) {
      const int sb = mod(r - s - 1, n), rb = mod(r - s - 2, n);
      auto sends = send_segments(io, right, data + blocks.begin(sb) * esize,
                                 blocks.length(sb) * esize, Phase::reduce_scatter, size_t(s));
      char* block = data + blocks.begin(rb) * esize;
      recv_reduce(io, left, block, block, blocks.length(rb) * esize, dtype, op,
                  Phase::reduce_scatter, size_t(s), segs);
      io.wait_all(sends);
    }
    if (op == ReduceOp::AVG) divide(data + blocks.begin(r) * esize, blocks.length(r), dtype, n);
    // All-gather the completed blocks around the ring.
    for (int s = 0; s + 1 < n; ++s) {
      const int sb = mod(r - s, n), rb = mod(r - s - 1, n);
      auto recv = io.recv(left, data + blocks.begin(rb) * esize, blocks.length(rb) * esize,
                          make_tag(Phase::all_gather, size_t(s), 0));
      auto send = io.send(right, data + blocks.begin(sb) * esize, blocks.length(sb) * esize,
                          make_tag(Phase::all_gather, size_t(s), 0));
      io.wait(recv);
      io.wait(send);
    }
  }
}

void reduce_scatter(PeerIo& io, const char* input, char* output, size_t count, DType dtype,
                    ReduceOp op, Scratch& scratch) {
  const int n = io.size(), r = io.rank();
  const size_t bytes = count * itemsize(dtype);
  if (bytes == 0) return;
  if (n == 1) {
    std::memmove(output, input, bytes);
    return;
  }
  const int right = mod(r + 1, n), left = mod(r - 1, n);
  char* segs = scratch.get(0, kInflight * kSegmentBytes);
  // Partial sums alternate between two buffers: one being sent while the next is reduced.
  char* partial[2] = {scratch.get(1, bytes), scratch.get(2, bytes)};
  for (int s = 0; s + 1 < n; ++s) {
    const int sb = mod(r - s - 1, n), rb = mod(r - s - 2, n);
    const char* src = s == 0 ? input + size_t(sb) * bytes : partial[(s - 1) % 2];
    char* dst = s + 2 == n ? output : partial[s % 2];
    auto sends = send_segments(io, right, src, bytes, Phase::reduce_scatter, size_t(s));
    recv_reduce(io, left, dst, input + size_t(rb) * bytes, bytes, dtype, op, Phase::reduce_scatter,
                size_t(s), segs);
    io.wait_all(sends);
  }
  if (op == ReduceOp::AVG) divide(output, count, dtype, n);
}

void all_gather(PeerIo& io, const std::vector<char*>& blocks, size_t block_bytes) {
  const int n = io.size(), r = io.rank();
  const int right = mod(r + 1, n), left = mod(r - 1, n);
  for (int s = 0; s + 1 < n; ++s) {
    const int sb = mod(r - s, n), rb = mod(r - s - 1, n);
    auto recv =
        io.recv(left, blocks[size_t(rb)], block_bytes, make_tag(Phase::all_gather, size_t(s), 0));
    auto send =
        io.send(right, blocks[size_t(sb)], block_bytes, make_tag(Phase::all_gather, size_t(s), 0));
    io.wait(recv);
    io.wait(send);
  }
}

void broadcast(PeerIo& io, char* data, size_t nbytes, int root) {
  const int n = io.size(), r = io.rank();
  if (n == 1) return;
  // Chain root -> root+1 -> ...: each rank forwards a segment as soon as it has it, so the
  // whole tensor costs about one transfer time however many ranks there are.
  const int pos = mod(r - root, n);
  const int prev = mod(r - 1, n), next = mod(r + 1, n);
  const size_t nseg = segments(nbytes);
  std::vector<Transfer> recvs, sends;
  if (pos == 0) {
    sends = send_segments(io, next, data, nbytes, Phase::broadcast, 0);
  } else {
    for (size_t j = 0; j < nseg; ++j) {
      const size_t off = j * kSegmentBytes;
      recvs.push_back(io.recv(prev, data + off, std::min(kSegmentBytes, nbytes - off),
                              make_tag(Phase::broadcast, 0, j)));
    }
    for (size_t j = 0; j < nseg; ++j) {
      io.wait(recvs[j]);
      if (pos + 1 < n) {
        const size_t off = j * kSegmentBytes;
        sends.push_back(io.send(next, data + off, std::min(kSegmentBytes, nbytes - off),
                                make_tag(Phase::broadcast, 0, j)));
      }
    }
  }
  io.wait_all(sends);
}

void barrier(PeerIo& io) {
  const int n = io.size(), r = io.rank();
  char out = 1, in = 0;
  for (int k = 1, round = 0; k < n; k *= 2, ++round) {
    auto recv = io.recv(mod(r - k, n), &in, 1, make_tag(Phase::barrier, size_t(round), 0));
    auto send = io.send(mod(r + k, n), &out, 1, make_tag(Phase::barrier, size_t(round), 0));
    io.wait(recv);
    io.wait(send);
  }
}

}  // namespace zenith::distributed
