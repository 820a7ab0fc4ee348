// Distributed checkpoints that load under any other layout: every rank writes its pieces of
// each tensor with their global offsets, and one metadata file lists them all.
//
//   dir/shard-<r>.safetensors  rank r's pieces, by tensor name; its __metadata__ holds
//                              "zenith.pieces": {name: {"global_shape", "offset"}}
//   dir/metadata.json          {"format": "zenith-sharded", "version": 1, "ranks": N,
//                              "tensors": {name: {"dtype", "shape", "pieces": [{"file",
//                              "offset", "shape"}]}}}, written last and atomically, so a
//                              checkpoint without it is incomplete
//
// A reader assembles any block of a tensor (another rank count, another placement, or the
// whole tensor for one process) from the pieces that overlap it; bytes are copied, never
// converted, so a re-saved tensor is bit-identical. Replicated pieces (equal offsets and
// shapes on several ranks) are listed once.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "distributed/placement.h"
#include "zenith/communication.h"

namespace zenith::distributed {

// One rank's piece of a global tensor.
struct ShardedTensor {
  std::string name;
  Shape global_shape;
  Shape offset;  // global index of local's first element; empty: all zeros
  Tensor local;
};

inline constexpr const char* kShardedMetadataFile = "metadata.json";

// Collective over `group`: each rank writes its file, then (after a barrier) the group's first
// rank writes metadata.json. `dir` must be one directory every rank can reach (one host or a
// shared file system).
void save_sharded(const std::string& dir, const std::vector<ShardedTensor>& tensors,
                  const communication::Group& group = {});

// Reads a checkpoint save_sharded wrote, with any number of ranks; no communication.
class ShardedCheckpointReader {
 public:
  explicit ShardedCheckpointReader(std::string dir);
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const { return tensors_.count(name) > 0; }
  const Shape& global_shape(const std::string& name) const;
  DType dtype(const std::string& name) const;
  // The block `block` of tensor `name` (local shape and global offset), assembled from the
  // pieces that overlap it; throws when part of the block is in no piece.
  Tensor read(const std::string& name, const LocalShard& block) const;
  Tensor read_full(const std::string& name) const;

 private:
  struct Piece {
    std::string file;
    Shape offset, shape;
  };
  struct Entry {
    DType dtype = DType::f32;
    Shape shape;
    std::vector<Piece> pieces;
  };
  const Entry& entry(const std::string& name) const;
  std::string dir_;
  std::map<std::string, Entry> tensors_;
};

}  // namespace zenith::distributed
