// NCCL collectives for CUDA tensors. Compiled in only where CMake found CUDA and NCCL
// (ZENITH_HAVE_NCCL); elsewhere every entry point fails with
// "[communication] nccl backend not available in this build".
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "zenith/communication.h"
#include "zenith/dtype.h"

namespace zenith::distributed {

class Store;
struct NcclComm;
struct NcclCommDeleter {
  void operator()(NcclComm* comm) const;
};
using NcclCommPtr = std::unique_ptr<NcclComm, NcclCommDeleter>;

bool nccl_available();

// Collective over the group: group rank 0 publishes an NCCL unique id under `key` in `store`
// (null for a group of one), every rank joins on CUDA device `device` within `timeout`.
NcclCommPtr nccl_connect(Store* store, const std::string& key, int rank, int size, int device,
                         std::chrono::milliseconds timeout);

// Each call enqueues on the communicator's stream (after the device's default stream) and waits
// for completion, polling for NCCL errors; past `timeout` it aborts the communicator and throws.
struct NcclCall {
  const char* op;
  std::chrono::milliseconds timeout;
};
void nccl_all_reduce(NcclComm& comm, void* data, size_t count, DType dtype,
                     communication::ReduceOp op, const NcclCall& call);
void nccl_broadcast(NcclComm& comm, void* data, size_t count, DType dtype, int root,
                    const NcclCall& call);
// outputs[i] <- rank i's input (count elements each).
void nccl_all_gather(NcclComm& comm, const void* input, const std::vector<void*>& outputs,
                     size_t count, DType dtype, const NcclCall& call);
void nccl_reduce_scatter(NcclComm& comm, const void* input, void* output, size_t count, DType dtype,
                         communication::ReduceOp op, const NcclCall& call);

}  // namespace zenith::distributed
