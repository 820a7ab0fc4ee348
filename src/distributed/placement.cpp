#include "distributed/placement.h"

#include <algorithm>
#include <sstream>

#include "zenith/error.h"

namespace zenith::distributed {

std::string Placement::str() const {
  switch (kind) {
    case Kind::replicate:
      return "Replicate()";
    case Kind::shard:
      return "Shard(" + std::to_string(dim) + ")";
    case Kind::partial:
      return "Partial()";
  }
  return "?";
}

Chunk chunk_of(int64_t size, int parts, int index) {
  ZENITH_CHECK(parts >= 1 && index >= 0 && index < parts, "[placement] chunk ", index, " of ",
               parts, " is out of range");
  const int64_t step = (size + parts - 1) / parts;  // torch.chunk: ceil, the tail shorter
  const int64_t begin = std::min(size, step * index);
  return {begin, std::min(size, begin + step) - begin};
}

std::string TensorPlacement::str() const {
  std::ostringstream os;
  os << "[";
  for (MeshDim d : {MeshDim::pipeline, MeshDim::data, MeshDim::tensor})
    os << (d == MeshDim::pipeline ? "" : ", ") << mesh_dim_name(d) << " " << (*this)[d].str();
  os << "]";
  return os.str();
}

int64_t LocalShard::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

LocalShard local_shard(const Shape& global, int dim, int parts, int index) {
  ZENITH_CHECK(dim >= 0 && dim < int(global.size()), "[placement] Shard(", dim,
               ") of a tensor with ", global.size(), " dimensions");
  LocalShard s{global, Shape(global.size(), 0)};
  const Chunk c = chunk_of(global[size_t(dim)], parts, index);
  s.shape[size_t(dim)] = c.length;
  s.offset[size_t(dim)] = c.offset;
  return s;
}

LocalShard local_shard(const Shape& global, const TensorPlacement& placement,
                       const MeshLayout& layout, const MeshCoord& coord) {
  LocalShard s{global, Shape(global.size(), 0)};
  for (MeshDim d : {MeshDim::pipeline, MeshDim::data, MeshDim::tensor}) {
    const Placement& p = placement[d];
    if (!p.is_shard()) continue;
    ZENITH_CHECK(p.dim >= 0 && p.dim < int(global.size()), "[placement] ", mesh_dim_name(d),
                 " Shard(", p.dim, ") of a tensor with ", global.size(), " dimensions");
    const size_t k = size_t(p.dim);
    // Nested: this dimension splits what the earlier ones left.
    const Chunk c = chunk_of(s.shape[k], layout.degree(d), coord[d]);
    s.offset[k] += c.offset;
    s.shape[k] = c.length;
  }
  return s;
}

Tensor slice_shard(const Tensor& full, const LocalShard& shard) {
  ZENITH_CHECK(full.dim() == int64_t(shard.shape.size()), "[placement] slice_shard: tensor has ",
               full.dim(), " dimensions, the shard ", shard.shape.size());
  Tensor t = full;
  for (size_t k = 0; k < shard.shape.size(); ++k)
    if (shard.shape[k] != full.shape()[k])
      t = t.narrow(int64_t(k), shard.offset[k], shard.shape[k]);
  return t;
}

}  // namespace zenith::distributed
