// The collective entry points: validate on the caller's thread (clear errors, nothing queued),
// then queue the work on the group's communication thread. CPU tensors run the algorithms of
// algorithms.cpp over Gloo; CUDA tensors go to NCCL.
#include <cstring>

#include "distributed/reduce.h"
#include "distributed/world.h"
#include "zenith/communication.h"
#include "zenith/error.h"

namespace zenith::communication {

namespace {

using detail::GroupImpl;
using GroupPtr = std::shared_ptr<GroupImpl>;

void check_tensor(const Tensor& t, const char* op, const char* what) {
  ZENITH_CHECK(t.defined(), "[communication] ", op, ": ", what, " is undefined");
  ZENITH_CHECK(distributed::is_supported_dtype(t.dtype()), "[communication] ", op, ": ", what,
               " has dtype ", dtype_name(t.dtype()),
               "; collectives support float32, float64, int32 and int64");
  // (An empty tensor has nothing to lay out; some empty views report non-contiguous strides.)
  ZENITH_CHECK(!t.has_layout() && (t.is_contiguous() || t.numel() == 0), "[communication] ", op,
               ": ", what,
               " must be contiguous with a plain layout (call contiguous() first; collectives "
               "write in place)");
}

void check_reduce_op(ReduceOp op, DType dtype, const char* name) {
  ZENITH_CHECK(op != ReduceOp::AVG || is_floating(dtype), "[communication] ", name,
               ": ReduceOp::AVG needs a floating-point tensor, got ", dtype_name(dtype));
}

// All tensors of one call on one device; true when that device is CUDA (NCCL).
bool on_cuda(const std::vector<Tensor>& ts, const char* op) {
  const Device d = ts.front().device();
  for (const auto& t : ts)
    ZENITH_CHECK(t.device() == d, "[communication] ", op, ": tensors on different devices (",
                 d.str(), " and ", t.device().str(), ")");
  if (d.type != DeviceType::CUDA) return false;
  ZENITH_CHECK(distributed::nccl_available(),
               "[communication] nccl backend not available in this build (", op, " on ", d.str(),
               "; build with the CUDA toolkit and NCCL, see ZENITH_WITH_NCCL)");
  return true;
}

// The group's NCCL communicator, made on first use (all ranks reach it at the same collective).
distributed::NcclComm& nccl_of(GroupImpl& g, int device) {
  if (!g.nccl) {
    g.nccl = distributed::nccl_connect(g.store.get(), "nccl" + std::to_string(g.seq), g.rank,
                                       g.size(), device, g.timeout);
    g.nccl_device = device;
  }
  ZENITH_CHECK(g.nccl_device == device, "[communication] ", g.name, " uses cuda:", g.nccl_device,
               " for NCCL; got a tensor on cuda:", device);
  return *g.nccl;
}

char* bytes_of(const Tensor& t) { return static_cast<char*>(t.raw_data()); }

int group_rank_of(const GroupImpl& g, int world_rank, const char* op) {
  for (size_t i = 0; i < g.ranks.size(); ++i)
    if (g.ranks[i] == world_rank) return int(i);
  ZENITH_FAIL("[communication] ", op, ": root ", world_rank, " is not a rank of ", g.name);
}

// Bytes a ring moves per rank for `bytes` of data: NCCL's volume, counted for its stats.
uint64_t ring_bytes(size_t bytes, int n) {
  return n > 1 ? bytes * uint64_t(n - 1) / uint64_t(n) : 0;
}

Work all_reduce_impl(const Tensor& tensor, ReduceOp op, const Group& group, bool blocking) {
  const char* name = "all_reduce";
  auto g = distributed::resolve_group(group, name);
  check_tensor(tensor, name, "tensor");
  check_reduce_op(op, tensor.dtype(), name);
  const bool cuda = on_cuda({tensor}, name);
  GroupImpl* gp = g.get();
  return g->submit(
      name, detail::make_signature(name, &tensor, int(op)), {tensor},
      [=](distributed::PeerIo& io) {
        const size_t count = size_t(tensor.numel());
        if (cuda) {
          distributed::nccl_all_reduce(nccl_of(*gp, tensor.device().index), bytes_of(tensor), count,
                                       tensor.dtype(), op, {name, gp->timeout});
          const auto moved = 2 * ring_bytes(tensor.nbytes(), io.size());
          io.count(moved, moved);
        } else {
          distributed::all_reduce(io, bytes_of(tensor), count, tensor.dtype(), op, gp->scratch);
        }
      },
      blocking);
}

Work broadcast_impl(const Tensor& tensor, int root, const Group& group, bool blocking) {
  const char* name = "broadcast";
  auto g = distributed::resolve_group(group, name);
  check_tensor(tensor, name, "tensor");
  const int group_root = group_rank_of(*g, root, name);
  const bool cuda = on_cuda({tensor}, name);
  GroupImpl* gp = g.get();
  return g->submit(
      name, detail::make_signature(name, &tensor, -1, root), {tensor},
      [=](distributed::PeerIo& io) {
        if (cuda) {
          distributed::nccl_broadcast(nccl_of(*gp, tensor.device().index), bytes_of(tensor),
                                      size_t(tensor.numel()), tensor.dtype(), group_root,
                                      {name, gp->timeout});
          const uint64_t b = tensor.nbytes();
          io.count(io.rank() == group_root ? b : 0, io.rank() == group_root ? 0 : b);
        } else {
          distributed::broadcast(io, bytes_of(tensor), tensor.nbytes(), group_root);
        }
      },
      blocking);
}

// Queues an all_gather into `blocks(rank)` (the output memory of each rank's block), once the
// tensors in `keep` (outputs and input) are validated.
Work submit_all_gather(const GroupPtr& g, const Tensor& input, std::vector<Tensor> keep,
                       std::function<std::vector<char*>()> blocks_of, bool blocking) {
  const char* name = "all_gather";
  keep.push_back(input);
  const bool cuda = on_cuda(keep, name);
  GroupImpl* gp = g.get();
  return g->submit(
      name, detail::make_signature(name, &input), keep,
      [=](distributed::PeerIo& io) {
        std::vector<char*> blocks = blocks_of();
        const size_t bytes = input.nbytes();
        if (cuda) {
          std::vector<void*> outs(blocks.begin(), blocks.end());
          distributed::nccl_all_gather(nccl_of(*gp, input.device().index), bytes_of(input), outs,
                                       size_t(input.numel()), input.dtype(), {name, gp->timeout});
          io.count(bytes * uint64_t(io.size() - 1), bytes * uint64_t(io.size() - 1));
          return;
        }
        char* mine = blocks[size_t(io.rank())];
        if (mine != bytes_of(input) && bytes > 0) std::memmove(mine, bytes_of(input), bytes);
        distributed::all_gather(io, blocks, bytes);
      },
      blocking);
}

Work all_gather_impl(const std::vector<Tensor>& outputs, const Tensor& input, const Group& group,
                     bool blocking) {
  const char* name = "all_gather";
  auto g = distributed::resolve_group(group, name);
  check_tensor(input, name, "input");
  ZENITH_CHECK(int(outputs.size()) == g->size(), "[communication] ", name, ": expected ", g->size(),
               " output tensors (one per rank of ", g->name, "), got ", outputs.size());
  for (const auto& out : outputs) {
    check_tensor(out, name, "output");
    ZENITH_CHECK(out.dtype() == input.dtype() && out.numel() == input.numel(), "[communication] ",
                 name, ": each output must match the input (", dtype_name(input.dtype()), " ",
                 shape_str(input.shape()), "), got ", dtype_name(out.dtype()), " ",
                 shape_str(out.shape()));
  }
  return submit_all_gather(
      g, input, outputs,
      [outputs] {
        std::vector<char*> blocks;
        for (const auto& out : outputs) blocks.push_back(bytes_of(out));
        return blocks;
      },
      blocking);
}

Work all_gather_impl(const Tensor& output, const Tensor& input, const Group& group, bool blocking) {
  const char* name = "all_gather";
  auto g = distributed::resolve_group(group, name);
  check_tensor(input, name, "input");
  check_tensor(output, name, "output");
  ZENITH_CHECK(output.dtype() == input.dtype() && output.numel() == input.numel() * g->size(),
               "[communication] ", name, ": output must be ", dtype_name(input.dtype()), " with ",
               g->size(), " x ", input.numel(), " elements, got ", dtype_name(output.dtype()), " ",
               shape_str(output.shape()));
  const int n = g->size();
  return submit_all_gather(
      g, input, {output},
      [output, n, bytes = input.nbytes()] {
        std::vector<char*> blocks;
        for (int i = 0; i < n; ++i) blocks.push_back(bytes_of(output) + size_t(i) * bytes);
        return blocks;
      },
      blocking);
}

Work reduce_scatter_impl(const Tensor& output, const Tensor& input, ReduceOp op, const Group& group,
                         bool blocking) {
  const char* name = "reduce_scatter";
  auto g = distributed::resolve_group(group, name);
  check_tensor(input, name, "input");
  check_tensor(output, name, "output");
  check_reduce_op(op, input.dtype(), name);
  ZENITH_CHECK(output.dtype() == input.dtype() && input.numel() == output.numel() * g->size(),
               "[communication] ", name, ": input must be ", dtype_name(output.dtype()), " with ",
               g->size(), " x ", output.numel(), " elements (the output's numel per rank), got ",
               dtype_name(input.dtype()), " ", shape_str(input.shape()));
  const bool cuda = on_cuda({input, output}, name);
  GroupImpl* gp = g.get();
  return g->submit(
      name, detail::make_signature(name, &input, int(op)), {input, output},
      [=](distributed::PeerIo& io) {
        const size_t count = size_t(output.numel());
        if (cuda) {
          distributed::nccl_reduce_scatter(nccl_of(*gp, input.device().index), bytes_of(input),
                                           bytes_of(output), count, input.dtype(), op,
                                           {name, gp->timeout});
          const auto moved = ring_bytes(input.nbytes(), io.size());
          io.count(moved, moved);
        } else {
          distributed::reduce_scatter(io, bytes_of(input), bytes_of(output), count, input.dtype(),
                                      op, gp->scratch);
        }
      },
      blocking);
}

Work barrier_impl(const Group& group, bool blocking) {
  const char* name = "barrier";
  auto g = distributed::resolve_group(group, name);
  return g->submit(
      name, detail::make_signature(name, nullptr), {},
      [](distributed::PeerIo& io) { distributed::barrier(io); }, blocking);
}

}  // namespace

Work all_reduce_async(const Tensor& tensor, ReduceOp op, const Group& group) {
  return all_reduce_impl(tensor, op, group, false);
}
Work broadcast_async(const Tensor& tensor, int root, const Group& group) {
  return broadcast_impl(tensor, root, group, false);
}
Work all_gather_async(const std::vector<Tensor>& outputs, const Tensor& input, const Group& group) {
  return all_gather_impl(outputs, input, group, false);
}
Work all_gather_async(const Tensor& output, const Tensor& input, const Group& group) {
  return all_gather_impl(output, input, group, false);
}
Work reduce_scatter_async(const Tensor& output, const Tensor& input, ReduceOp op,
                          const Group& group) {
  return reduce_scatter_impl(output, input, op, group, false);
}
Work barrier_async(const Group& group) { return barrier_impl(group, false); }

// Blocking calls run on the caller's thread when the group has nothing queued.
void all_reduce(const Tensor& tensor, ReduceOp op, const Group& group) {
  all_reduce_impl(tensor, op, group, true).wait();
}
void broadcast(const Tensor& tensor, int root, const Group& group) {
  broadcast_impl(tensor, root, group, true).wait();
}
void all_gather(const std::vector<Tensor>& outputs, const Tensor& input, const Group& group) {
  all_gather_impl(outputs, input, group, true).wait();
}
void all_gather(const Tensor& output, const Tensor& input, const Group& group) {
  all_gather_impl(output, input, group, true).wait();
}
Tensor all_gather(const Tensor& input, const Group& group) {
  auto g = distributed::resolve_group(group, "all_gather");
  Shape shape{int64_t(g->size())};
  shape.insert(shape.end(), input.shape().begin(), input.shape().end());
  Tensor output = Tensor::empty(shape, input.dtype(), input.device());
  all_gather(output, input, group);
  return output;
}
void reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op, const Group& group) {
  reduce_scatter_impl(output, input, op, group, true).wait();
}
void barrier(const Group& group) { barrier_impl(group, true).wait(); }

}  // namespace zenith::communication
