// `zenith eval --model seedcnn --checkpoint FILE --dataset fashion-mnist`: prints the
// checkpoint's metrics on a split as JSON, e.g. {"Accuracy": 0.9132, "Loss": 0.2468}.
// Model and dataset default to the ones the checkpoint was trained with.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "zenith/zenith.h"

namespace zenith::cli {
namespace {

int run_eval(int argc, char** argv) {
  std::string model_name, dataset_name, data_dir, checkpoint, split = "test", predictions;
  int64_t batch_size = 256, limit = 0, threads = 0, image_size = 0;
  bool confusion = false;
  CLI::App app{"Evaluate a checkpoint on a dataset; prints JSON metrics", "zenith eval"};
  app.add_option("--checkpoint", checkpoint, "checkpoint (.safetensors)")->required();
  app.add_option("--model", model_name, "zoo model (default: the checkpoint's)");
  app.add_option("--dataset", dataset_name, "dataset name (default: the checkpoint's)");
  app.add_option("--data-dir", data_dir, "dataset directory (default: its standard location)");
  app.add_option("--split", split, "train or test")->capture_default_str();
  app.add_option("--batch-size", batch_size, "evaluation batch size")->capture_default_str();
  app.add_option("--limit", limit, "only the first N samples (0: all)");
  app.add_option("--image-size", image_size, "resize images to N x N (default: as trained)");
  app.add_option("--threads", threads, "compute threads (0: default)");
  app.add_flag("--confusion-matrix", confusion, "add the confusion matrix to the output");
  app.add_option("--predictions", predictions,
                 "also write each sample's class as JSON lines {index, label, prediction}");
  if (auto exit_code = parse_args(app, argc, argv)) return *exit_code;

  // The checkpoint's own settings fill in what was not given.
  io::Metadata meta = io::read_safetensors_metadata(checkpoint);
  nlohmann::json saved =
      meta.count("config") ? nlohmann::json::parse(meta["config"]) : nlohmann::json::object();
  if (model_name.empty()) model_name = saved.value("model", "");
  if (dataset_name.empty()) dataset_name = saved.value("dataset", "");
  if (data_dir.empty() && saved.value("dataset", "") == dataset_name)
    data_dir = saved.value("data-dir", "");
  if (image_size == 0) image_size = saved.value("image-size", int64_t(0));
  ZENITH_CHECK(!model_name.empty(), "[eval] ", checkpoint,
               " does not say which model it holds; "
               "pass --model (known: seedcnn, lenet, resnet18)");
  ZENITH_CHECK(!dataset_name.empty(),
               "[eval] pass --dataset (known: fashion-mnist, mnist, "
               "cifar10, image-folder)");
  if (threads > 0) context::set_num_threads(int(threads));

  dataset::PipelineOptions opts{.batch_size = batch_size,
                                .training = false,
                                .num_workers = 1,
                                .limit = limit,
                                .image_size = image_size};
  auto data = dataset::classification_pipeline(dataset_name, data_dir, split, opts);
  const auto& info = data.info;
  auto net = models::create(model_name, info.channels, info.image_size, info.num_classes);
  auto cm = std::make_shared<metrics::ConfusionMatrix>(info.num_classes);
  std::map<std::string, metrics::MetricPtr> ms = {{"Accuracy", metrics::Accuracy()}};
  if (confusion) ms["ConfusionMatrix"] = cm;
  Model model(net, nn::SoftmaxCrossEntropyWithLogits(/*sparse=*/true), nullptr, ms);
  model.load_checkpoint(checkpoint);
  auto result = model.eval(data.dataset);
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, value] : result)
    if (name != "ConfusionMatrix") out[name] = value;
  if (confusion) out["ConfusionMatrix"] = cm->matrix();
  std::printf("%s\n", out.dump().c_str());
  if (!predictions.empty()) {
    std::ofstream file(predictions);
    ZENITH_CHECK(bool(file), "[eval] cannot write ", predictions);
    int64_t index = 0;
    for (int64_t b = 0; b < data.dataset.get_dataset_size(); ++b) {
      dataset::Row batch = data.dataset.get(b);
      auto classes = metrics::predicted_classes(model.predict(batch[0]));
      auto labels = metrics::label_values(batch[1]);
      for (size_t i = 0; i < classes.size(); ++i)
        file << nlohmann::json(
                    {{"index", index++}, {"label", labels[i]}, {"prediction", classes[i]}})
                    .dump()
             << "\n";
    }
  }
  return 0;
}

}  // namespace

ZENITH_COMMAND("eval", "Evaluate a checkpoint on a dataset (prints JSON metrics)", run_eval);

}  // namespace zenith::cli
