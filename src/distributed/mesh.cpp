#include "distributed/mesh.h"

#include <sstream>

#include "distributed/group.h"
#include "distributed/world.h"
#include "zenith/error.h"

namespace zenith::distributed {

namespace comm = communication;

const char* mesh_dim_name(MeshDim dim) {
  switch (dim) {
    case MeshDim::pipeline:
      return "pipeline";
    case MeshDim::data:
      return "data";
    case MeshDim::tensor:
      return "tensor";
  }
  return "?";
}

MeshLayout::MeshLayout(MeshShape shape, int world_size) {
  ZENITH_CHECK(world_size >= 1, "[mesh] world size must be >= 1, got ", world_size);
  ZENITH_CHECK(shape.pipeline >= 1 && shape.tensor >= 1 && shape.data >= 0,
               "[mesh] degrees must "
               "be >= 1 (data 0: what remains), got pipeline ",
               shape.pipeline, ", data ", shape.data, ", tensor ", shape.tensor);
  const int model = shape.pipeline * shape.tensor;
  if (shape.data == 0) {
    ZENITH_CHECK(world_size % model == 0, "[mesh] ", world_size, " ranks cannot be split into ",
                 "pipeline ", shape.pipeline, " x tensor ", shape.tensor, " (", model,
                 " ranks per model replica): the world size must be a multiple of ", model);
    shape.data = world_size / model;
  }
  ZENITH_CHECK(model * shape.data == world_size, "[mesh] pipeline ", shape.pipeline, " x data ",
               shape.data, " x tensor ", shape.tensor, " = ", model * shape.data,
               " ranks, but the job has ", world_size,
               " (the degrees must multiply to the world size)");
  pipeline_ = shape.pipeline;
  data_ = shape.data;
  tensor_ = shape.tensor;
}

int MeshLayout::degree(MeshDim d) const {
  return d == MeshDim::pipeline ? pipeline_ : d == MeshDim::data ? data_ : tensor_;
}

MeshCoord MeshLayout::coord_of(int rank) const {
  ZENITH_CHECK(rank >= 0 && rank < world_size(), "[mesh] rank ", rank, " out of range for ",
               describe());
  return {rank / (data_ * tensor_), (rank / tensor_) % data_, rank % tensor_};
}

int MeshLayout::rank_of(const MeshCoord& c) const {
  ZENITH_CHECK(c.pipeline >= 0 && c.pipeline < pipeline_ && c.data >= 0 && c.data < data_ &&
                   c.tensor >= 0 && c.tensor < tensor_,
               "[mesh] coordinate (pipeline ", c.pipeline, ", data ", c.data, ", tensor ", c.tensor,
               ") out of range for ", describe());
  return (c.pipeline * data_ + c.data) * tensor_ + c.tensor;
}

std::vector<int> MeshLayout::group_ranks(MeshDim d, int rank) const {
  MeshCoord c = coord_of(rank);
  std::vector<int> ranks;
  for (int i = 0; i < degree(d); ++i) {
    (d == MeshDim::pipeline ? c.pipeline : d == MeshDim::data ? c.data : c.tensor) = i;
    ranks.push_back(rank_of(c));
  }
  return ranks;
}

std::string MeshLayout::describe() const {
  std::ostringstream os;
  os << "pipeline " << pipeline_ << " x data " << data_ << " x tensor " << tensor_ << " ("
     << world_size() << (world_size() == 1 ? " rank)" : " ranks)");
  return os.str();
}

DeviceMesh DeviceMesh::create(MeshShape shape) {
  ZENITH_CHECK(comm::is_initialized(),
               "[mesh] communication is not initialized; call communication::init() first");
  DeviceMesh mesh;
  mesh.layout_ = MeshLayout(shape, comm::get_group_size());
  mesh.rank_ = comm::get_rank();
  mesh.coord_ = mesh.layout_.coord_of(mesh.rank_);
  const MeshLayout& l = mesh.layout_;
  // Every rank makes every group in the same order (new_group's contract): per dimension, the
  // groups through the ranks whose coordinate on that dimension is 0, in rank order.
  for (MeshDim d : {MeshDim::pipeline, MeshDim::data, MeshDim::tensor}) {
    for (int r = 0; r < l.world_size(); ++r) {
      if (l.coord_of(r)[d] != 0) continue;
      auto ranks = l.group_ranks(d, r);
      auto g = comm::new_group(ranks);
      if (g.is_member()) mesh.groups_[size_t(d)] = g;
    }
  }
  // Point-to-point pairs between neighbouring stages, one group per direction.
  for (int r = 0; r < l.world_size(); ++r) {
    const MeshCoord c = l.coord_of(r);
    if (c.pipeline + 1 >= l.pipeline_degree()) continue;
    const int next = l.rank_of({c.pipeline + 1, c.data, c.tensor});
    auto forward = comm::new_group({r, next});
    auto backward = comm::new_group({r, next});
    if (r == mesh.rank_) {
      mesh.p2p_[0] = forward;
      mesh.p2p_[1] = backward;
    } else if (next == mesh.rank_) {
      mesh.p2p_[2] = forward;
      mesh.p2p_[3] = backward;
    }
  }
  return mesh;
}

int DeviceMesh::next_stage_rank() const {
  ZENITH_CHECK(has_next_stage(), "[mesh] rank ", rank_, " is the last pipeline stage (",
               coord_.pipeline, " of ", layout_.pipeline_degree(), "); there is no next stage");
  return layout_.rank_of({coord_.pipeline + 1, coord_.data, coord_.tensor});
}

int DeviceMesh::prev_stage_rank() const {
  ZENITH_CHECK(has_prev_stage(), "[mesh] rank ", rank_,
               " is the first pipeline stage; there is no previous stage");
  return layout_.rank_of({coord_.pipeline - 1, coord_.data, coord_.tensor});
}

// A point-to-point message is a broadcast over a group of the two ranks: it inherits the
// group's timeout, input check, dead-peer errors and byte counters.
comm::Work DeviceMesh::send_next_async(const Tensor& t) const {
  next_stage_rank();
  return comm::broadcast_async(t, rank_, p2p_[0]);
}
comm::Work DeviceMesh::recv_next_async(const Tensor& t) const {
  return comm::broadcast_async(t, next_stage_rank(), p2p_[1]);
}
comm::Work DeviceMesh::recv_prev_async(const Tensor& t) const {
  return comm::broadcast_async(t, prev_stage_rank(), p2p_[2]);
}
comm::Work DeviceMesh::send_prev_async(const Tensor& t) const {
  prev_stage_rank();
  return comm::broadcast_async(t, rank_, p2p_[3]);
}
void DeviceMesh::send_next(const Tensor& t) const {
  next_stage_rank();
  comm::broadcast(t, rank_, p2p_[0]);
}
void DeviceMesh::recv_next(const Tensor& t) const {
  comm::broadcast(t, next_stage_rank(), p2p_[1]);
}
void DeviceMesh::recv_prev(const Tensor& t) const {
  comm::broadcast(t, prev_stage_rank(), p2p_[2]);
}
void DeviceMesh::send_prev(const Tensor& t) const {
  prev_stage_rank();
  comm::broadcast(t, rank_, p2p_[3]);
}

GroupTraffic group_traffic(const comm::Group& group) {
  auto g = group.is_world() ? nullptr : group.impl();
  if (group.is_world()) g = resolve_group(group, "traffic");
  GroupTraffic t;
  t.calls = g->traffic_calls.load();
  t.bytes_sent = g->traffic_sent.load();
  t.bytes_received = g->traffic_received.load();
  t.seconds = double(g->traffic_nanos.load()) * 1e-9;
  t.blocked_seconds = double(g->blocked_nanos->load()) * 1e-9;
  return t;
}

GroupTraffic DeviceMesh::traffic(MeshDim d) const {
  GroupTraffic total = group_traffic(group(d));
  if (d != MeshDim::pipeline) return total;
  for (const auto& g : p2p_) {
    if (!g.impl()) continue;
    GroupTraffic t = group_traffic(g);
    total.calls += t.calls;
    total.bytes_sent += t.bytes_sent;
    total.bytes_received += t.bytes_received;
    total.seconds += t.seconds;
    total.blocked_seconds += t.blocked_seconds;
  }
  return total;
}

std::string DeviceMesh::describe() const {
  std::ostringstream os;
  os << layout_.describe() << "; rank " << rank_ << " at pipeline " << coord_.pipeline << ", data "
     << coord_.data << ", tensor " << coord_.tensor;
  return os.str();
}

}  // namespace zenith::distributed
