#include "serve/package.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/atomic_file.h"
#include "onnx/onnx_runtime.h"
#include "platform/deployments/deployment_store.h"
#include "zenith/data.h"
#include "zenith/io.h"
#include "zenith/models.h"

namespace zenith::serve {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  ZENITH_CHECK(bool(in), "[package] cannot read ", path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

json PackageSpec::to_json() const {
  return {{"format", "zenith-model-package"},
          {"format_version", 1},
          {"name", name},
          {"arch", arch},
          {"input",
           {{"name", "input"},
            {"datatype", "FP32"},
            {"shape", {-1, channels, image_size, image_size}}}},
          {"preprocessing", {{"rescale", 1.0 / 255.0}, {"mean", mean}, {"std", std}}},
          {"num_classes", num_classes},
          {"labels", labels},
          {"dataset", dataset},
          {"source", source},
          {"epoch", epoch},
          {"sha256", sha256},
          {"created_at", created_at},
          {"model_file", model_file}};
}

PackageSpec PackageSpec::from_json(const json& j) {
  ZENITH_CHECK(j.value("format", "") == "zenith-model-package",
               "[package] not a zenith model package (format '", j.value("format", ""), "')");
  PackageSpec s;
  s.name = j.at("name");
  s.arch = j.at("arch");
  const auto& shape = j.at("input").at("shape");
  s.channels = shape.at(1);
  s.image_size = shape.at(2);
  s.num_classes = j.at("num_classes");
  s.mean = j.at("preprocessing").at("mean").get<std::vector<double>>();
  s.std = j.at("preprocessing").at("std").get<std::vector<double>>();
  s.labels = j.at("labels").get<std::vector<std::string>>();
  s.dataset = j.value("dataset", "");
  s.source = j.value("source", "");
  s.epoch = j.value("epoch", int64_t(0));
  s.sha256 = j.value("sha256", "");
  s.created_at = j.value("created_at", 0.0);
  s.model_file = j.value("model_file", "weights.safetensors");
  ZENITH_CHECK(s.model_file == "weights.safetensors" || s.model_file == "model.onnx",
               "[package] unknown model_file '", s.model_file,
               "' (weights.safetensors or model.onnx)");
  ZENITH_CHECK(int64_t(s.labels.size()) == s.num_classes, "[package] ", s.labels.size(),
               " labels for ", s.num_classes, " classes");
  return s;
}

std::vector<std::string> default_labels(const std::string& dataset, int64_t num_classes) {
  static const std::vector<std::string> fashion = {
      "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
      "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  static const std::vector<std::string> cifar = {
      "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"};
  if (dataset == "fashion-mnist" && num_classes == 10) return fashion;
  if (dataset == "cifar10" && num_classes == 10) return cifar;
  std::vector<std::string> out;
  for (int64_t i = 0; i < num_classes; ++i) out.push_back(std::to_string(i));
  return out;
}

std::string package_hash(const std::string& dir) { return platform::package_content_hash(dir); }

namespace {

// What a training checkpoint's metadata says, with the options winning.
PackageSpec checkpoint_spec(const std::string& checkpoint, const PackageOptions& options,
                            io::Metadata& meta) {
  meta = io::read_safetensors_metadata(checkpoint);
  json config = meta.count("config") ? json::parse(meta["config"]) : json::object();
  PackageSpec spec;
  spec.arch = !options.arch.empty() ? options.arch : config.value("model", "");
  ZENITH_CHECK(!spec.arch.empty(), "[package] ", checkpoint,
               " does not say which model it holds; pass --arch (known: seedcnn, lenet, "
               "resnet18)");
  spec.dataset = !options.dataset.empty() ? options.dataset : config.value("dataset", "");
  ZENITH_CHECK(!spec.dataset.empty(), "[package] ", checkpoint,
               " does not say what it was trained on; pass --dataset");
  const dataset::DatasetInfo& info = dataset::dataset_info(spec.dataset);
  spec.channels = info.channels;
  spec.image_size = config.value("image-size", int64_t(0)) > 0 ? config["image-size"].get<int64_t>()
                                                               : info.image_size;
  spec.num_classes = info.num_classes;
  if (meta.count("epoch")) spec.epoch = std::stoll(meta["epoch"]);
  return spec;
}

// What an exported graph says: `zenith export` writes the arch and dataset into its metadata;
// the input [N, C, H, W] and output [N, classes] shapes give the rest.
PackageSpec onnx_spec(const std::string& path, const PackageOptions& options) {
  const onnx::OnnxGraph g = onnx::read_onnx(path);
  onnx::OnnxModel runnable(g);  // every op is one the interpreter runs
  auto meta = [&](const char* key) {
    auto it = g.metadata.find(key);
    return it == g.metadata.end() ? std::string() : it->second;
  };
  PackageSpec spec;
  spec.arch = !options.arch.empty() ? options.arch : meta("zenith.arch");
  if (spec.arch.empty()) spec.arch = "onnx";
  spec.dataset = !options.dataset.empty() ? options.dataset : meta("zenith.dataset");
  ZENITH_CHECK(!spec.dataset.empty(), "[package] ", path,
               " does not say what it was trained on (preprocessing); pass --dataset");
  ZENITH_CHECK(g.inputs.size() == 1 && g.inputs[0].shape.size() == 4 &&
                   g.inputs[0].shape[2] == g.inputs[0].shape[3] && g.inputs[0].shape[2] > 0,
               "[package] ", path, " takes ", g.inputs.size(),
               " inputs; a served image model takes one [N, C, S, S]");
  ZENITH_CHECK(!g.outputs.empty() && g.outputs[0].shape.size() == 2 && g.outputs[0].shape[1] > 0,
               "[package] ", path, ": a served classifier's output is [N, classes]");
  spec.channels = g.inputs[0].shape[1];
  spec.image_size = g.inputs[0].shape[2];
  spec.num_classes = g.outputs[0].shape[1];
  const std::string epoch = meta("zenith.epoch");
  if (!epoch.empty()) spec.epoch = std::stoll(epoch);
  spec.model_file = "model.onnx";
  return spec;
}

}  // namespace

PackageSpec write_package(const std::string& source, const std::string& dir,
                          const std::string& name, const PackageOptions& options) {
  ZENITH_CHECK(fs::is_regular_file(source), "[package] no checkpoint at '", source, "'");
  const bool onnx = fs::path(source).extension() == ".onnx";
  io::Metadata meta;
  PackageSpec spec = onnx ? onnx_spec(source, options) : checkpoint_spec(source, options, meta);
  spec.name = name;
  const dataset::DatasetInfo& info = dataset::dataset_info(spec.dataset);
  ZENITH_CHECK(spec.channels == info.channels, "[package] ", source, " takes ", spec.channels,
               " channels; ", spec.dataset, " images have ", info.channels);
  spec.mean = info.mean;
  spec.std = info.std;
  spec.source = fs::absolute(source).string();
  if (!options.labels_file.empty()) {
    std::istringstream lines(read_file(options.labels_file));
    for (std::string l; std::getline(lines, l);) {
      while (!l.empty() && (l.back() == '\r' || l.back() == ' ')) l.pop_back();
      if (!l.empty()) spec.labels.push_back(l);
    }
    if (spec.num_classes <= 0) spec.num_classes = int64_t(spec.labels.size());
    ZENITH_CHECK(int64_t(spec.labels.size()) == spec.num_classes, "[package] ", options.labels_file,
                 " names ", spec.labels.size(), " labels; the model has ", spec.num_classes,
                 " classes");
  } else {
    spec.labels = default_labels(spec.dataset, spec.num_classes);
  }
  ZENITH_CHECK(spec.channels > 0 && spec.image_size > 0 && spec.num_classes > 0,
               "[package] cannot tell the input size of ", source, " (dataset '", spec.dataset,
               "'); pass --dataset");

  // Loading into the zoo network checks every name and shape against the architecture.
  nn::CellPtr net;
  if (!onnx) {
    net = models::create(spec.arch, spec.channels, spec.image_size, spec.num_classes);
    io::load_checkpoint(source, *net);
  }
  ZENITH_CHECK(!fs::exists(dir + "/package.json"), "[package] ", dir, " already holds a package");
  fs::create_directories(dir);
  if (onnx)
    fs::copy_file(source, dir + "/" + spec.model_file, fs::copy_options::overwrite_existing);
  else
    io::save_checkpoint(dir + "/" + spec.model_file, *net, nullptr,
                        {{"arch", spec.arch}, {"source", spec.source}});
  spec.created_at =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  // The hash covers package.json as written (without the hash), so write it twice.
  const std::string path = dir + "/package.json";
  auto write = [&] { core::write_file_atomic(path, spec.to_json().dump(2) + "\n"); };
  write();
  spec.sha256 = package_hash(dir);
  write();
  return spec;
}

PackageSpec read_package(const std::string& dir) {
  const std::string path = dir + "/package.json";
  ZENITH_CHECK(fs::is_regular_file(path), "[package] ", dir,
               " is not a model package (no package.json); make one with `zenith deploy`");
  json j;
  try {
    j = json::parse(read_file(path));
  } catch (const json::exception& e) {
    ZENITH_FAIL("[package] ", path, ": ", e.what());
  }
  PackageSpec spec;
  try {
    spec = PackageSpec::from_json(j);
  } catch (const json::exception& e) {
    ZENITH_FAIL("[package] ", path, ": ", e.what());
  }
  ZENITH_CHECK(package_hash(dir) == spec.sha256, "[package] ", dir,
               ": content hash mismatch (the weights or package.json were modified)");
  return spec;
}

nn::CellPtr load_network(const std::string& dir, const PackageSpec& spec) {
  if (spec.model_file == "model.onnx") return onnx::onnx_cell(dir + "/model.onnx");
  auto net = models::create(spec.arch, spec.channels, spec.image_size, spec.num_classes);
  io::load_checkpoint(dir + "/weights.safetensors", *net);
  net->set_train(false);
  return net;
}

}  // namespace zenith::serve
