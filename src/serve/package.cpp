#include "serve/package.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/atomic_file.h"
#include "platform/services/service_store.h"
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
          {"created_at", created_at}};
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

PackageSpec write_package(const std::string& checkpoint, const std::string& dir,
                          const std::string& name, const PackageOptions& options) {
  ZENITH_CHECK(fs::is_regular_file(checkpoint), "[package] no checkpoint at '", checkpoint, "'");
  io::Metadata meta = io::read_safetensors_metadata(checkpoint);
  json config = meta.count("config") ? json::parse(meta["config"]) : json::object();
  PackageSpec spec;
  spec.name = name;
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
  spec.mean = info.mean;
  spec.std = info.std;
  spec.source = fs::absolute(checkpoint).string();
  if (meta.count("epoch")) spec.epoch = std::stoll(meta["epoch"]);
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
               "[package] cannot tell the input size of ", checkpoint, " (dataset '", spec.dataset,
               "'); pass --dataset");

  // Loading into the zoo network checks every name and shape against the architecture.
  auto net = models::create(spec.arch, spec.channels, spec.image_size, spec.num_classes);
  io::load_checkpoint(checkpoint, *net);
  ZENITH_CHECK(!fs::exists(dir + "/package.json"), "[package] ", dir, " already holds a package");
  fs::create_directories(dir);
  io::save_checkpoint(dir + "/weights.safetensors", *net, nullptr,
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
  auto net = models::create(spec.arch, spec.channels, spec.image_size, spec.num_classes);
  io::load_checkpoint(dir + "/weights.safetensors", *net);
  net->set_train(false);
  return net;
}

}  // namespace zenith::serve
