#include "distributed/zero_checkpoint.h"

#include "zenith/error.h"

namespace zenith::distributed {

namespace {

Shape global_of(const ZeroShard& s) { return s.global_shape.empty() ? Shape{1} : s.global_shape; }

Shape offset_of(const ZeroShard& s) {
  Shape offset(global_of(s).size(), 0);
  offset[0] = s.rows.offset;
  return offset;
}

void check_names(const ZeroOptimizer& zero, const std::vector<std::string>& names) {
  ZENITH_CHECK(names.size() == zero.shards().size(), "[checkpoint] ", names.size(), " names for ",
               zero.shards().size(), " ZeRO parameters");
}

}  // namespace

bool split_slot(const std::string& key, std::string* slot, size_t* index) {
  const auto dot = key.rfind('.');
  if (dot == std::string::npos) return false;
  *slot = key.substr(0, dot);
  *index = size_t(std::stoul(key.substr(dot + 1)));
  return true;
}

std::vector<ShardedTensor> zero_optimizer_pieces(
    const ZeroOptimizer& zero, const std::function<ShardedTensor(size_t)>& parameter) {
  std::vector<ShardedTensor> out;
  for (const auto& [key, t] : zero.inner().state_dict()) {
    std::string slot;
    size_t j = 0;
    if (key == "step") {
      out.push_back({"optimizer.step", {1}, {0}, t.reshape({1})});
    } else if (split_slot(key, &slot, &j)) {
      const size_t i = zero.inner_index().at(j);
      ShardedTensor piece = parameter(i);
      piece.name += "." + slot;
      piece.local = t.reshape(zero.shards().at(i).shard.shape());
      out.push_back(std::move(piece));
    }
  }
  return out;
}

std::vector<ShardedTensor> zero_state_pieces(const ZeroOptimizer& zero,
                                             const std::vector<std::string>& names) {
  check_names(zero, names);
  std::vector<ShardedTensor> out;
  const auto& shards = zero.shards();
  for (size_t i = 0; i < shards.size(); ++i)
    out.push_back({names[i], global_of(shards[i]), offset_of(shards[i]), shards[i].shard});
  for (ShardedTensor& piece : zero_optimizer_pieces(zero, [&](size_t i) {
         return ShardedTensor{names[i], global_of(shards[i]), offset_of(shards[i]), {}};
       }))
    out.push_back(std::move(piece));
  return out;
}

void save_zero_checkpoint(const std::string& dir, const ZeroOptimizer& zero,
                          const std::vector<std::string>& names) {
  save_sharded(dir, zero_state_pieces(zero, names), zero.group());
}

void load_zero_checkpoint(const std::string& dir, ZeroOptimizer& zero,
                          const std::vector<std::string>& names) {
  check_names(zero, names);
  ShardedCheckpointReader reader(dir);
  NoGradGuard no_grad;
  const auto& shards = zero.shards();
  for (size_t i = 0; i < shards.size(); ++i) {
    const ZeroShard& s = shards[i];
    ZENITH_CHECK(reader.global_shape(names[i]) == global_of(s), "[checkpoint] '", names[i], "' is ",
                 shape_str(reader.global_shape(names[i])), " in ", dir, ", the model has ",
                 shape_str(global_of(s)));
    if (zero.stage() == 3) {
      Tensor(s.shard).copy_(reader.read(names[i], {s.shard.shape(), offset_of(s)}));
    } else {
      Tensor(s.param).copy_(reader.read_full(names[i]).reshape(s.param.shape()));
    }
  }
  nn::StateDict state;
  for (const auto& [key, t] : zero.inner().state_dict()) {
    std::string slot;
    size_t j = 0;
    if (key == "step") {
      state[key] = reader.read_full("optimizer.step").reshape({});
    } else if (split_slot(key, &slot, &j)) {
      const size_t i = zero.inner_index().at(j);
      const ZeroShard& s = shards[i];
      state[key] =
          reader.read(names[i] + "." + slot, {s.shard.shape(), offset_of(s)}).reshape(t.shape());
    }
  }
  zero.inner().load_state_dict(state);
}

}  // namespace zenith::distributed
