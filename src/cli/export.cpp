// `zenith export --checkpoint CKPT --model ARCH --format onnx --out model.onnx`: a zoo CNN's
// inference graph as ONNX (opset 17, IR 8), traced from its eager forward in eval mode with
// BatchNorm folded into the convs (onnx/onnx_export.h). Before writing, zenith's ONNX
// interpreter reads the file's bytes back and must reproduce the network's outputs on a random
// batch (the difference is printed). Model and dataset (which fix the input shape) default to the
// checkpoint's.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/atomic_file.h"
#include "onnx/onnx_export.h"
#include "onnx/onnx_runtime.h"
#include "zenith/zenith.h"

namespace zenith::cli {
namespace {

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const auto x = a.to_double_vector(), y = b.to_double_vector();
  ZENITH_CHECK(x.size() == y.size(), "[export] outputs of ", x.size(), " and ", y.size(),
               " values");
  double d = 0;
  for (size_t i = 0; i < x.size(); ++i) d = std::max(d, std::abs(x[i] - y[i]));
  return d;
}

int run_export(int argc, char** argv) {
  std::string checkpoint, model_name, dataset_name, format = "onnx", out;
  int64_t image_size = 0;
  bool no_fold = false;
  CLI::App app{"Export a checkpoint's inference graph for deployment (ONNX)", "zenith export"};
  app.add_option("--checkpoint", checkpoint, "checkpoint (.safetensors)")->required();
  app.add_option("--model", model_name, "zoo model (default: the checkpoint's)");
  app.add_option("--dataset", dataset_name,
                 "dataset it was trained on (default: the checkpoint's): the input shape");
  app.add_option("--image-size", image_size, "input N x N (default: as trained)");
  app.add_option("--format", format, "onnx")->capture_default_str();
  app.add_option("--out", out, "output file")->required();
  app.add_flag("--no-fold-batch-norm", no_fold, "keep BatchNormalization nodes");
  if (auto exit_code = parse_args(app, argc, argv)) return *exit_code;
  ZENITH_CHECK(format == "onnx", "[export] unknown format '", format, "' (known: onnx)");

  io::Metadata meta = io::read_safetensors_metadata(checkpoint);
  nlohmann::json saved =
      meta.count("config") ? nlohmann::json::parse(meta["config"]) : nlohmann::json::object();
  if (model_name.empty()) model_name = saved.value("model", "");
  if (dataset_name.empty()) dataset_name = saved.value("dataset", "");
  if (image_size == 0) image_size = saved.value("image-size", int64_t(0));
  ZENITH_CHECK(!model_name.empty(), "[export] ", checkpoint,
               " does not say which model it holds; pass --model (known: seedcnn, lenet, "
               "resnet18)");
  ZENITH_CHECK(!dataset_name.empty(), "[export] ", checkpoint,
               " does not say what it was trained on; pass --dataset (it fixes the input shape)");
  const dataset::DatasetInfo& info = dataset::dataset_info(dataset_name);
  if (image_size == 0) image_size = info.image_size;

  auto net = models::create(model_name, info.channels, image_size, info.num_classes);
  io::load_checkpoint(checkpoint, *net);
  onnx::OnnxExportOptions options;
  options.fold_batch_norm = !no_fold;
  options.graph_name = model_name;
  options.metadata = {{"zenith.arch", model_name},
                      {"zenith.dataset", dataset_name},
                      {"zenith.checkpoint", checkpoint},
                      {"zenith.epoch", meta.count("epoch") ? meta["epoch"] : "0"},
                      {"zenith.num_classes", std::to_string(info.num_classes)}};
  const Shape input = {info.channels, image_size, image_size};
  onnx::OnnxGraph g = onnx::export_onnx(*net, input, options);
  const std::string bytes = onnx::serialize_onnx(g);

  // zenith's interpreter runs the file's graph as a second reading of it.
  Tensor x = Tensor::randn({3, info.channels, image_size, image_size});
  net->set_train(false);
  Tensor expected;
  {
    NoGradGuard no_grad;
    expected = net->forward(x);
  }
  const double diff =
      max_abs_diff(expected, onnx::OnnxModel(onnx::parse_onnx(bytes, out)).run({x})[0]);
  ZENITH_CHECK(diff < 1e-3, "[export] the exported graph computes other values than ", model_name,
               " (max abs diff ", diff, ")");
  core::write_file_atomic(out, bytes);

  std::string counts;
  for (const auto& [op, n] : g.op_counts())
    counts += (counts.empty() ? "" : ", ") + op + " " + std::to_string(n);
  std::printf(
      "exported %s [N, %lld, %lld, %lld] -> %s: ONNX opset %lld, %zu nodes (%s), %s "
      "batch norms folded, %zu initializers, %zu bytes\n",
      model_name.c_str(), (long long)info.channels, (long long)image_size, (long long)image_size,
      out.c_str(), (long long)onnx::kOnnxOpset, g.nodes.size(), counts.c_str(),
      g.metadata["zenith.batch_norms_folded"].c_str(), g.initializers.size(), bytes.size());
  std::printf(
      "checked: zenith's ONNX interpreter runs the file like the model (max abs diff %.3g)\n",
      diff);
  return 0;
}

}  // namespace

ZENITH_COMMAND("export", "Export a checkpoint's inference graph as ONNX", run_export);

}  // namespace zenith::cli
