// Collective algorithms over PeerIo (CPU memory). Ranks here are group ranks.
//   all_reduce      small: one all-to-all exchange, then every rank reduces in rank order;
//                   large: ring reduce-scatter then all-gather, 2(n-1)/n of the data each way
//   reduce_scatter  ring, without touching the input
//   all_gather      ring
//   broadcast       pipelined chain from the root, segment by segment
//   barrier         dissemination, ceil(log2 n) rounds of one-byte messages
#pragma once

#include <cstddef>
#include <vector>

#include "distributed/peer_io.h"
#include "zenith/communication.h"
#include "zenith/dtype.h"

namespace zenith::distributed {

// Reusable temporary memory, owned by a group, so steady-state collectives do not allocate.
class Scratch {
 public:
  char* get(size_t slot, size_t nbytes) {
    if (buffers_.size() <= slot) buffers_.resize(slot + 1);
    if (buffers_[slot].size() < nbytes) buffers_[slot].resize(nbytes);
    return buffers_[slot].data();
  }

 private:
  std::vector<std::vector<char>> buffers_;
};

void all_reduce(PeerIo& io, char* data, size_t count, DType dtype, communication::ReduceOp op,
                Scratch& scratch);
// output (count elements) <- block `rank` of op over every rank's input (size * count elements).
void reduce_scatter(PeerIo& io, const char* input, char* output, size_t count, DType dtype,
                    communication::ReduceOp op, Scratch& scratch);
// blocks[i] receives rank i's block; blocks[rank] must already hold this rank's data.
void all_gather(PeerIo& io, const std::vector<char*>& blocks, size_t block_bytes);
void broadcast(PeerIo& io, char* data, size_t nbytes, int root);
void barrier(PeerIo& io);

}  // namespace zenith::distributed
