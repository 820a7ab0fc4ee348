#include "distributed/sharded_checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/atomic_file.h"
#include "zenith/error.h"
#include "zenith/io.h"

namespace zenith::distributed {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kPiecesKey = "zenith.pieces";

std::string shard_file(int rank) { return "shard-" + std::to_string(rank) + ".safetensors"; }

}  // namespace

void save_sharded(const std::string& dir, const std::vector<ShardedTensor>& tensors,
                  const communication::Group& group) {
  const int rank = group.rank(), size = group.size();
  ZENITH_CHECK(rank >= 0, "[checkpoint] this rank is not a member of the saving group");
  fs::create_directories(dir);
  std::map<std::string, Tensor> out;
  json pieces = json::object();
  for (const auto& t : tensors) {
    ZENITH_CHECK(t.local.defined() && int64_t(t.global_shape.size()) == t.local.dim(),
                 "[checkpoint] '", t.name, "': local piece ",
                 t.local.defined() ? shape_str(t.local.shape()) : "undefined",
                 " does not have the rank of its global shape ", shape_str(t.global_shape));
    const Shape offset = t.offset.empty() ? Shape(t.global_shape.size(), 0) : t.offset;
    for (size_t k = 0; k < offset.size(); ++k)
      ZENITH_CHECK(offset[k] >= 0 && offset[k] + t.local.shape()[k] <= t.global_shape[k],
                   "[checkpoint] '", t.name, "': piece ", shape_str(t.local.shape()), " at ",
                   shape_str(offset), " lies outside ", shape_str(t.global_shape));
    ZENITH_CHECK(!out.count(t.name), "[checkpoint] '", t.name, "' listed twice on rank ", rank);
    if (t.local.numel() == 0) continue;  // an empty last shard holds nothing
    out.emplace(t.name, t.local.contiguous());
    pieces[t.name] = {{"global_shape", t.global_shape}, {"offset", offset}};
  }
  io::save_safetensors((fs::path(dir) / shard_file(rank)).string(), out,
                       {{kPiecesKey, pieces.dump()}});
  communication::barrier(group);
  if (rank == 0) {
    json tensors_json = json::object();
    for (int r = 0; r < size; ++r) {
      const std::string file = shard_file(r);
      io::Metadata meta;
      auto infos = io::list_safetensors((fs::path(dir) / file).string(), &meta);
      const json p = json::parse(meta.at(kPiecesKey));
      for (const auto& info : infos) {
        const auto& piece = p.at(info.name);
        json& entry = tensors_json[info.name];
        if (entry.is_null()) {
          entry = {{"dtype", dtype_name(info.dtype)},
                   {"shape", piece.at("global_shape")},
                   {"pieces", json::array()}};
        }
        ZENITH_CHECK(
            entry["shape"] == piece.at("global_shape") && entry["dtype"] == dtype_name(info.dtype),
            "[checkpoint] '", info.name, "': ranks disagree on its global shape or dtype");
        json item = {{"file", file}, {"offset", piece.at("offset")}, {"shape", info.shape}};
        bool seen = false;  // replicated: the first rank's copy is enough
        for (const auto& q : entry["pieces"])
          seen = seen || (q["offset"] == item["offset"] && q["shape"] == item["shape"]);
        if (!seen) entry["pieces"].push_back(item);
      }
    }
    json meta = {
        {"format", "zenith-sharded"}, {"version", 1}, {"ranks", size}, {"tensors", tensors_json}};
    core::write_file_atomic((fs::path(dir) / kShardedMetadataFile).string(), meta.dump(1));
  }
  communication::barrier(group);  // nobody reads the checkpoint before it is complete
}

ShardedCheckpointReader::ShardedCheckpointReader(std::string dir) : dir_(std::move(dir)) {
  const auto path = fs::path(dir_) / kShardedMetadataFile;
  std::ifstream in(path);
  ZENITH_CHECK(in.good(), "[checkpoint] ", path.string(),
               " not found: not a sharded checkpoint, or its save did not finish");
  json meta;
  try {
    meta = json::parse(in);
    ZENITH_CHECK(meta.at("format") == "zenith-sharded", "unknown format ", meta.at("format"));
    for (const auto& [name, t] : meta.at("tensors").items()) {
      Entry e;
      e.dtype = dtype_from_name(t.at("dtype").get<std::string>());
      e.shape = t.at("shape").get<Shape>();
      for (const auto& p : t.at("pieces"))
        e.pieces.push_back({p.at("file").get<std::string>(), p.at("offset").get<Shape>(),
                            p.at("shape").get<Shape>()});
      tensors_.emplace(name, std::move(e));
    }
  } catch (const json::exception& e) {
    ZENITH_FAIL("[checkpoint] ", path.string(), ": ", e.what());
  }
}

std::vector<std::string> ShardedCheckpointReader::names() const {
  std::vector<std::string> out;
  for (const auto& [name, _] : tensors_) out.push_back(name);
  return out;
}

const ShardedCheckpointReader::Entry& ShardedCheckpointReader::entry(
    const std::string& name) const {
  auto it = tensors_.find(name);
  ZENITH_CHECK(it != tensors_.end(), "[checkpoint] ", dir_, " has no tensor '", name, "'");
  return it->second;
}

const Shape& ShardedCheckpointReader::global_shape(const std::string& name) const {
  return entry(name).shape;
}

DType ShardedCheckpointReader::dtype(const std::string& name) const { return entry(name).dtype; }

Tensor ShardedCheckpointReader::read(const std::string& name, const LocalShard& block) const {
  const Entry& e = entry(name);
  const size_t nd = e.shape.size();
  ZENITH_CHECK(block.shape.size() == nd && block.offset.size() == nd, "[checkpoint] '", name,
               "' has shape ", shape_str(e.shape), "; asked for a block of rank ",
               block.shape.size());
  Tensor out = Tensor::empty(block.shape, e.dtype);
  int64_t covered = 0;
  for (const auto& p : e.pieces) {
    // The box both the block and the piece hold.
    Shape lo(nd), hi(nd);
    bool overlaps = true;
    for (size_t k = 0; k < nd; ++k) {
      lo[k] = std::max(block.offset[k], p.offset[k]);
      hi[k] = std::min(block.offset[k] + block.shape[k], p.offset[k] + p.shape[k]);
      overlaps = overlaps && lo[k] < hi[k];
    }
    if (!overlaps) continue;
    auto infos = io::list_safetensors((fs::path(dir_) / p.file).string());
    auto info =
        std::find_if(infos.begin(), infos.end(), [&](const auto& i) { return i.name == name; });
    ZENITH_CHECK(info != infos.end(), "[checkpoint] ", p.file, " has no piece of '", name, "'");
    Tensor piece = io::read_tensor(*info);
    Tensor dst = out, src = piece;
    int64_t n = 1;
    for (size_t k = 0; k < nd; ++k) {
      dst = dst.narrow(int64_t(k), lo[k] - block.offset[k], hi[k] - lo[k]);
      src = src.narrow(int64_t(k), lo[k] - p.offset[k], hi[k] - lo[k]);
      n *= hi[k] - lo[k];
    }
    dst.copy_(src);
    covered += n;  // pieces never overlap one another (replicas are listed once)
  }
  ZENITH_CHECK(covered == block.numel(), "[checkpoint] '", name, "': the pieces in ", dir_,
               " cover ", covered, " of the ", block.numel(), " elements asked for (block ",
               shape_str(block.shape), " at ", shape_str(block.offset), ")");
  return out;
}

Tensor ShardedCheckpointReader::read_full(const std::string& name) const {
  const Shape& shape = global_shape(name);
  return read(name, LocalShard{shape, Shape(shape.size(), 0)});
}

}  // namespace zenith::distributed
