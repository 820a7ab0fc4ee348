// The device mesh: the job's ranks arranged pipeline × data × tensor (tensor fastest, Megatron's
// order), with one communication group per line of the mesh along each dimension, made once.
//
//   communication::init();
//   auto mesh = distributed::DeviceMesh::create({.pipeline = 2, .tensor = 2});  // data: the rest
//   mesh.tensor_group();                      // this rank's tensor-parallel peers
//   communication::all_reduce(t, ReduceOp::SUM, mesh.tensor_group());
//   mesh.send_next(activation); mesh.recv_prev(activation);    // pipeline stages
//
// World rank = (pipeline_rank * data + data_rank) * tensor + tensor_rank, so a tensor group is
// contiguous ranks (one node, where the links are fastest) and a pipeline group strides across.
// Creating a mesh is collective: every rank of the world creates the same mesh, in the same
// order relative to other new_group() calls.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "zenith/communication.h"

namespace zenith::distributed {

enum class MeshDim { pipeline = 0, data = 1, tensor = 2 };
const char* mesh_dim_name(MeshDim dim);  // "pipeline", "data", "tensor"

// Degrees of the mesh. data = 0 means "what remains": world / (pipeline * tensor).
struct MeshShape {
  int pipeline = 1;
  int data = 0;
  int tensor = 1;
};

// A rank's position in the mesh.
struct MeshCoord {
  int pipeline = 0;
  int data = 0;
  int tensor = 0;
  int operator[](MeshDim d) const {
    return d == MeshDim::pipeline ? pipeline : d == MeshDim::data ? data : tensor;
  }
  bool operator==(const MeshCoord&) const = default;
};

// The arithmetic of a mesh, without communication (planning, tests, checkpoint layouts).
class MeshLayout {
 public:
  MeshLayout() = default;
  // Validates the degrees against `world_size` (each >= 1, product == world size) and throws
  // naming the degrees and the world size otherwise.
  MeshLayout(MeshShape shape, int world_size);
  int world_size() const { return pipeline_ * data_ * tensor_; }
  int degree(MeshDim d) const;
  int pipeline_degree() const { return pipeline_; }
  int data_degree() const { return data_; }
  int tensor_degree() const { return tensor_; }
  MeshCoord coord_of(int rank) const;
  int rank_of(const MeshCoord& c) const;
  // World ranks of the group along `d` through `rank`, in group order (by coordinate on d).
  std::vector<int> group_ranks(MeshDim d, int rank) const;
  // "pipeline 2 x data 1 x tensor 2 (4 ranks)"
  std::string describe() const;

 private:
  int pipeline_ = 1, data_ = 1, tensor_ = 1;
};

// Bytes one group moved, for per-step accounting (payload only, as communication::Stats), and
// the time its collectives took. `seconds` is their run time on whichever thread ran them (an
// async one may overlap the caller's compute); `blocked_seconds` is the time callers waited for
// them: a blocking call's whole duration, an async one's Work::wait() (steady_clock around the
// waits only). A peer that arrives late shows as blocked time on the ranks that wait for it.
// Counters run from the group's creation: the difference of two readings is one step's.
struct GroupTraffic {
  uint64_t calls = 0;
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  double seconds = 0;
  double blocked_seconds = 0;
  GroupTraffic operator-(const GroupTraffic& earlier) const {
    return {calls - earlier.calls, bytes_sent - earlier.bytes_sent,
            bytes_received - earlier.bytes_received, seconds - earlier.seconds,
            blocked_seconds - earlier.blocked_seconds};
  }
};

// The mesh of this job, with its groups. Cheap to copy (groups are shared handles).
class DeviceMesh {
 public:
  DeviceMesh() = default;
  // Collective over the world (communication::init() first). Throws a clear error when the
  // degrees do not multiply to the world size.
  static DeviceMesh create(MeshShape shape);

  const MeshLayout& layout() const { return layout_; }
  int rank() const { return rank_; }  // world rank
  int world_size() const { return layout_.world_size(); }
  const MeshCoord& coord() const { return coord_; }
  int degree(MeshDim d) const { return layout_.degree(d); }
  int local_rank(MeshDim d) const { return coord_[d]; }  // rank within that dimension's group
  int tensor_rank() const { return coord_.tensor; }
  int data_rank() const { return coord_.data; }
  int pipeline_rank() const { return coord_.pipeline; }

  // This rank's group along each dimension (a group of one when the degree is 1).
  const communication::Group& group(MeshDim d) const { return groups_[size_t(d)]; }
  const communication::Group& tensor_group() const { return group(MeshDim::tensor); }
  const communication::Group& data_group() const { return group(MeshDim::data); }
  const communication::Group& pipeline_group() const { return group(MeshDim::pipeline); }

  // Pipeline point-to-point: activations flow to the next stage, gradients to the previous
  // one, each direction over its own two-rank group, so that the two streams never have to
  // agree on an order. Each call must be matched by the peer's opposite call, in the same
  // order per direction. Every wait is bounded by the job's communication timeout; a dead
  // peer is an error naming its rank. `tensor` is contiguous and shaped as the peer's.
  bool has_next_stage() const { return coord_.pipeline + 1 < layout_.pipeline_degree(); }
  bool has_prev_stage() const { return coord_.pipeline > 0; }
  int next_stage_rank() const;                 // world rank; throws on the last stage
  int prev_stage_rank() const;                 // world rank; throws on the first stage
  void send_next(const Tensor& tensor) const;  // activations forward
  void recv_prev(const Tensor& tensor) const;
  void send_prev(const Tensor& tensor) const;  // gradients backward
  void recv_next(const Tensor& tensor) const;
  communication::Work send_next_async(const Tensor& tensor) const;
  communication::Work recv_prev_async(const Tensor& tensor) const;
  communication::Work send_prev_async(const Tensor& tensor) const;
  communication::Work recv_next_async(const Tensor& tensor) const;

  // Traffic of this rank's group along `d` since the mesh was made (pipeline: both directions
  // of point-to-point included). Take the difference of two readings for one step.
  GroupTraffic traffic(MeshDim d) const;

  std::string describe() const;  // layout and this rank's coordinates

 private:
  MeshLayout layout_;
  int rank_ = 0;
  MeshCoord coord_;
  std::array<communication::Group, 3> groups_;
  // Two-rank groups with the neighbouring stages: [0] activations to next, [1] gradients
  // from next, [2] activations from prev, [3] gradients to prev. Unset at the ends.
  std::array<communication::Group, 4> p2p_;
};

// Traffic of any group since it was made (the world's when `group` is the default).
GroupTraffic group_traffic(const communication::Group& group);

}  // namespace zenith::distributed
