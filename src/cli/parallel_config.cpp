#include "cli/parallel_config.h"

#include <yaml-cpp/yaml.h>

#include "zenith/error.h"

namespace zenith::cli {

namespace {

template <typename T>
T value_of(const YAML::Node& node, const std::string& key, const std::string& path) {
  try {
    return node.as<T>();
  } catch (const YAML::Exception&) {
    ZENITH_FAIL("[finetune] ", path, ": parallel_config.", key, " has a bad value (line ",
                node.Mark().line + 1, ")");
  }
}

int64_t positive(const YAML::Node& node, const std::string& key, const std::string& path) {
  const int64_t v = value_of<int64_t>(node, key, path);
  ZENITH_CHECK(v >= 1, "[finetune] ", path, ": parallel_config.", key, " must be >= 1, got ", v);
  return v;
}

}  // namespace

int64_t apply_parallel_config(const std::string& path, finetune::Options& o) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    ZENITH_FAIL("[finetune] ", path, ": ", e.what());
  }
  if (root.IsMap() && root["finetune"]) root = root["finetune"];
  if (!root.IsMap() || !root[kParallelConfigKey]) return 0;
  const YAML::Node block = root[kParallelConfigKey];
  ZENITH_CHECK(block.IsMap(), "[finetune] ", path, ": parallel_config must be a map");
  int64_t data_parallel = 0;
  for (const auto& item : block) {
    const std::string key = item.first.as<std::string>();
    const YAML::Node& v = item.second;
    if (key == "data_parallel") {
      data_parallel = positive(v, key, path);
    } else if (key == "model_parallel") {
      o.tensor_parallel = positive(v, key, path);
    } else if (key == "pipeline_stage") {
      o.pipeline_parallel = positive(v, key, path);
    } else if (key == "micro_batch_num") {
      o.micro_batches = positive(v, key, path);
    } else if (key == "use_seq_parallel") {
      o.sequence_parallel = value_of<bool>(v, key, path);
    } else if (key == "optimizer_shard") {
      if (value_of<bool>(v, key, path)) o.zero_stage = 1;
    } else {
      ZENITH_FAIL("[finetune] ", path, ": parallel_config.", key,
                  " is not supported (zenith reads data_parallel, model_parallel, "
                  "pipeline_stage, micro_batch_num, use_seq_parallel, optimizer_shard)");
    }
  }
  return data_parallel;
}

void check_data_parallel(int64_t data_parallel, const finetune::Options& o, int ranks) {
  if (data_parallel == 0) return;
  const int64_t model = o.tensor_parallel * o.pipeline_parallel;
  ZENITH_CHECK(data_parallel * model == ranks, "[finetune] parallel_config: data_parallel ",
               data_parallel, " x model_parallel ", o.tensor_parallel, " x pipeline_stage ",
               o.pipeline_parallel, " is ", data_parallel * model, " ranks; the job has ", ranks);
}

}  // namespace zenith::cli
