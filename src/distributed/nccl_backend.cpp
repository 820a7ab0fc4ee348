#include "distributed/nccl_backend.h"

#include "distributed/store.h"
#include "distributed/util.h"
#include "zenith/error.h"

#if ZENITH_HAVE_NCCL
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstring>
#include <thread>
#endif

namespace zenith::distributed {

#if !ZENITH_HAVE_NCCL

struct NcclComm {};
void NcclCommDeleter::operator()(NcclComm* comm) const { std::default_delete<NcclComm>()(comm); }
bool nccl_available() { return false; }

namespace {
[[noreturn]] void unavailable() {
  ZENITH_FAIL(
      "[communication] nccl backend not available in this build (CUDA tensors need a "
      "build with the CUDA toolkit and NCCL; see ZENITH_WITH_NCCL)");
}
}  // namespace

NcclCommPtr nccl_connect(Store*, const std::string&, int, int, int, std::chrono::milliseconds) {
  unavailable();
}
void nccl_all_reduce(NcclComm&, void*, size_t, DType, communication::ReduceOp, const NcclCall&) {
  unavailable();
}
void nccl_broadcast(NcclComm&, void*, size_t, DType, int, const NcclCall&) { unavailable(); }
void nccl_all_gather(NcclComm&, const void*, const std::vector<void*>&, size_t, DType,
                     const NcclCall&) {
  unavailable();
}
void nccl_reduce_scatter(NcclComm&, const void*, void*, size_t, DType, communication::ReduceOp,
                         const NcclCall&) {
  unavailable();
}

#else

struct NcclComm {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t ready = nullptr;  // recorded on the default stream before each collective
  int device = 0;
  int rank = 0;
  int size = 1;

  NcclComm() = default;
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;
  ~NcclComm() {
    cudaSetDevice(device);
    if (comm) ncclCommDestroy(comm);  // an aborted communicator was already dropped
    if (ready) cudaEventDestroy(ready);
    if (stream) cudaStreamDestroy(stream);
  }
};

void NcclCommDeleter::operator()(NcclComm* c) const { std::default_delete<NcclComm>()(c); }

bool nccl_available() { return true; }

namespace {

void check_cuda(cudaError_t rc, const char* what) {
  ZENITH_CHECK(rc == cudaSuccess, "[communication] ", what, ": ", cudaGetErrorString(rc));
}

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f32:
      return ncclFloat32;
    case DType::f64:
      return ncclFloat64;
    case DType::i32:
      return ncclInt32;
    case DType::i64:
      return ncclInt64;
    default:
      ZENITH_FAIL("[communication] nccl: unsupported dtype ", dtype_name(t));
  }
}

ncclRedOp_t nccl_op(communication::ReduceOp op) {
  switch (op) {
    case communication::ReduceOp::SUM:
      return ncclSum;
    case communication::ReduceOp::AVG:
      return ncclAvg;
    case communication::ReduceOp::MAX:
      return ncclMax;
    case communication::ReduceOp::MIN:
      return ncclMin;
  }
  return ncclSum;
}

// Waits for a non-blocking NCCL call (and, with `stream_done`, the stream) to finish; aborts the
// communicator past the deadline so a dead peer never hangs this rank.
void settle(NcclComm& c, ncclResult_t rc, const NcclCall& call, Clock::time_point start,
            bool wait_stream) {
  auto fail = [&](const std::string& why) {
    ncclCommAbort(c.comm);
    c.comm = nullptr;
    ZENITH_FAIL("[communication] ", call.op, " (nccl) ", why);
  };
  if (rc != ncclSuccess && rc != ncclInProgress)
    fail(std::string("failed: ") + ncclGetErrorString(rc) + " " + ncclGetLastError(c.comm));
  for (int spins = 0;; ++spins) {
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(c.comm, &async);
    if (async != ncclSuccess && async != ncclInProgress)
      fail(std::string("failed: ") + ncclGetErrorString(async) + " " + ncclGetLastError(c.comm));
    if (async == ncclSuccess) {
      if (!wait_stream) return;
      const auto q = cudaStreamQuery(c.stream);
      if (q == cudaSuccess) return;
      if (q != cudaErrorNotReady) fail(std::string("failed: ") + cudaGetErrorString(q));
    }
    if (Clock::now() - start > call.timeout)
      fail("timed out after " + format_seconds(call.timeout) +
           " (a peer is dead, hung or never joined; the timeout is ZENITH_COMM_TIMEOUT)");
    if (spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

// Makes the comm stream wait for work already queued on the device's default stream.
void order_after_default_stream(NcclComm& c) {
  check_cuda(cudaSetDevice(c.device), "cudaSetDevice");
  check_cuda(cudaEventRecord(c.ready, nullptr), "cudaEventRecord");
  check_cuda(cudaStreamWaitEvent(c.stream, c.ready, 0), "cudaStreamWaitEvent");
}

}  // namespace

NcclCommPtr nccl_connect(Store* store, const std::string& key, int rank, int size, int device,
                         std::chrono::milliseconds timeout) {
  NcclCommPtr c(std::make_unique<NcclComm>().release());
  c->device = device;
  c->rank = rank;
  c->size = size;
  check_cuda(cudaSetDevice(device), "cudaSetDevice");
  ncclUniqueId id;
  if (rank == 0) {
    ncclResult_t rc = ncclGetUniqueId(&id);
    ZENITH_CHECK(rc == ncclSuccess, "[communication] ncclGetUniqueId: ", ncclGetErrorString(rc));
    if (store) store->set(key, std::vector<char>(id.internal, id.internal + sizeof(id.internal)));
  } else {
    ZENITH_CHECK(store != nullptr, "[communication] nccl: no store to exchange the NCCL id");
    auto bytes = store->get(key);
    ZENITH_CHECK(bytes.size() == sizeof(id.internal), "[communication] bad NCCL id under ", key);
    std::memcpy(id.internal, bytes.data(), sizeof(id.internal));
  }
  check_cuda(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking), "cudaStreamCreate");
  check_cuda(cudaEventCreateWithFlags(&c->ready, cudaEventDisableTiming), "cudaEventCreate");
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // so that init and collectives can be abandoned on timeout
  const auto start = Clock::now();
  ncclResult_t rc = ncclCommInitRankConfig(&c->comm, size, id, rank, &config);
  settle(*c, rc, NcclCall{"init", timeout}, start, false);
  return c;
}

void nccl_all_reduce(NcclComm& c, void* data, size_t count, DType dtype, communication::ReduceOp op,
                     const NcclCall& call) {
  order_after_default_stream(c);
  const auto start = Clock::now();
  auto rc = ncclAllReduce(data, data, count, nccl_type(dtype), nccl_op(op), c.comm, c.stream);
  settle(c, rc, call, start, true);
}

void nccl_broadcast(NcclComm& c, void* data, size_t count, DType dtype, int root,
                    const NcclCall& call) {
  order_after_default_stream(c);
  const auto start = Clock::now();
  auto rc = ncclBroadcast(data, data, count, nccl_type(dtype), root, c.comm, c.stream);
  settle(c, rc, call, start, true);
}

void nccl_all_gather(NcclComm& c, const void* input, const std::vector<void*>& outputs,
                     size_t count, DType dtype, const NcclCall& call) {
  order_after_default_stream(c);
  const size_t bytes = count * itemsize(dtype);
  bool packed = true;  // outputs laid out back to back: one ncclAllGather
  for (size_t i = 0; i < outputs.size(); ++i)
    packed = packed && static_cast<char*>(outputs[i]) == static_cast<char*>(outputs[0]) + i * bytes;
  const auto start = Clock::now();
  ncclResult_t rc;
  if (packed) {
    rc = ncclAllGather(input, outputs[0], count, nccl_type(dtype), c.comm, c.stream);
  } else {
    // Separate outputs: one broadcast per source rank, fused into one NCCL group.
    ncclGroupStart();
    for (int i = 0; i < c.size; ++i)
      ncclBroadcast(i == c.rank ? input : outputs[size_t(i)], outputs[size_t(i)], count,
                    nccl_type(dtype), i, c.comm, c.stream);
    rc = ncclGroupEnd();
  }
  settle(c, rc, call, start, true);
}

void nccl_reduce_scatter(NcclComm& c, const void* input, void* output, size_t count, DType dtype,
                         communication::ReduceOp op, const NcclCall& call) {
  order_after_default_stream(c);
  const auto start = Clock::now();
  auto rc =
      ncclReduceScatter(input, output, count, nccl_type(dtype), nccl_op(op), c.comm, c.stream);
  settle(c, rc, call, start, true);
}

#endif

}  // namespace zenith::distributed
