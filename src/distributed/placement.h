// How a tensor is laid out over a mesh: one Placement per mesh dimension, in DTensor's terms.
//   Replicate  every rank of the dimension holds the whole tensor
//   Shard(d)   rank i holds chunk i of tensor dimension d (torch.chunk's split: chunks of
//              ceil(n / degree), so the last ones are shorter, possibly empty)
//   Partial    every rank holds a summand; the tensor is their sum (row-parallel outputs,
//              gradients before their reduction)
// Tensor-parallel layers, ZeRO sharding and sharded checkpoints all describe tensors so.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "distributed/mesh.h"
#include "zenith/tensor.h"

namespace zenith::distributed {

struct Placement {
  enum class Kind { replicate, shard, partial };
  Kind kind = Kind::replicate;
  int dim = -1;  // the tensor dimension, for shard

  static Placement replicate() { return {}; }
  static Placement shard(int dim) { return {Kind::shard, dim}; }
  static Placement partial() { return {Kind::partial, -1}; }
  bool is_shard() const { return kind == Kind::shard; }
  bool is_replicate() const { return kind == Kind::replicate; }
  bool is_partial() const { return kind == Kind::partial; }
  bool operator==(const Placement&) const = default;
  std::string str() const;  // "Replicate()", "Shard(0)", "Partial()"
};

// Chunk `index` of `size` elements split `parts` ways, torch.chunk's rule.
struct Chunk {
  int64_t offset = 0;
  int64_t length = 0;
};
Chunk chunk_of(int64_t size, int parts, int index);

// One placement per mesh dimension, indexed by MeshDim (pipeline, data, tensor).
struct TensorPlacement {
  std::array<Placement, 3> dims{};
  Placement& operator[](MeshDim d) { return dims[size_t(d)]; }
  const Placement& operator[](MeshDim d) const { return dims[size_t(d)]; }
  bool operator==(const TensorPlacement&) const = default;
  std::string str() const;  // "[pipeline Replicate(), data Shard(0), tensor Shard(1)]"
};

// The block of the global tensor one rank holds.
struct LocalShard {
  Shape shape;   // local shape
  Shape offset;  // global index of the local [0, 0, ...]
  int64_t numel() const;
  bool empty() const { return numel() == 0; }
};

// Where rank `coord` of `layout` holds `global`: sharding along several mesh dimensions on
// the same tensor dimension nests in mesh order (pipeline, then data, then tensor), as
// DTensor's. Throws when a sharded dimension is out of range.
LocalShard local_shard(const Shape& global, const TensorPlacement& placement,
                       const MeshLayout& layout, const MeshCoord& coord);

// One dimension only: chunk `index` of `parts` on tensor dimension `dim`.
LocalShard local_shard(const Shape& global, int dim, int parts, int index);

// A view of `full` holding `shard`'s block (for slicing a global tensor to a rank's shard).
Tensor slice_shard(const Tensor& full, const LocalShard& shard);

}  // namespace zenith::distributed
