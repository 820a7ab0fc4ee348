// `zenith export --checkpoint CKPT --model ARCH --format onnx --out model.onnx`: a zoo CNN's
// inference graph as ONNX (opset 17, IR 8), traced from its eager forward in eval mode with
// BatchNorm folded into the convs (onnx/onnx_export.h). Before writing, zenith's ONNX
// interpreter reads the file's bytes back and must reproduce the network's outputs on a random
// batch (the difference is printed). Model and dataset (which fix the input shape) default to the
// checkpoint's.
//
// `zenith export --format gguf --model DIR --out model.gguf [--dtype f32|f16|bf16]`: a LLaMA-family
// model directory (config.json, safetensors, tokenizer files) as one GGUF v3 file for llama.cpp
// and Ollama (models/llama_gguf.cpp, docs/gguf.md). zenith reads the file back and checks that
// it holds the model's weights before it is committed.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/atomic_file.h"
#include "onnx/onnx_export.h"
#include "onnx/onnx_runtime.h"
#include "zenith/gguf.h"
#include "zenith/quant.h"
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

// The weights of `a` and `b` equal bit for bit once in `a`'s dtypes; the first that differs.
std::string first_difference(const models::Llama& a, const models::Llama& b) {
  const auto x = a.hf_state(), y = b.hf_state();
  if (x.size() != y.size()) return "the tensor count";
  for (const auto& [name, t] : x) {
    auto it = y.find(name);
    if (it == y.end()) return name + " (missing)";
    Tensor u = it->second.dtype() == t.dtype() ? it->second : it->second.to(t.dtype());
    Tensor c = t.contiguous();
    u = u.contiguous();
    if (u.shape() != c.shape() || std::memcmp(u.raw_data(), c.raw_data(), c.nbytes()) != 0)
      return name;
  }
  const auto la = a.linear_layers(), lb = b.linear_layers();
  for (size_t i = 0; i < la.size() && i < lb.size(); ++i) {
    const QuantizedWeight *p = la[i].second->quantized_weight(),
                          *q = lb[i].second->quantized_weight();
    if (!p != !q) return la[i].first + ".weight (quantized in one of them only)";
    if (p && (p->format != q->format || p->blocks.nbytes() != q->blocks.nbytes() ||
              std::memcmp(p->blocks.contiguous().raw_data(), q->blocks.contiguous().raw_data(),
                          p->blocks.nbytes()) != 0))
      return la[i].first + ".weight (blocks)";
  }
  return "";
}

int export_gguf(const std::string& model_dir, const std::string& out, std::string dtype,
                bool dtype_given, const std::string& name, const std::string& adapter_dir) {
  ZENITH_CHECK(!model_dir.empty(),
               "[export] --format gguf needs --model DIR (a LLaMA-family model directory)");
  if (!adapter_dir.empty()) {  // the adapter alone, for llama.cpp's --lora with the base's GGUF
    const int64_t n = models::save_gguf_adapter(io::load_lora_adapter(adapter_dir),
                                                models::load_llama_config(model_dir), out);
    std::printf("exported %s -> %s: GGUF v3 LoRA adapter of %s, %lld tensors\n",
                adapter_dir.c_str(), out.c_str(), model_dir.c_str(), (long long)n);
    return 0;
  }
  // A `zenith quantize` directory keeps its blocks: they are written unchanged.
  auto model = models::is_quantized_dir(model_dir) ? models::load_quantized(model_dir)
                                                   : models::Llama::from_pretrained(model_dir);
  auto tokenizer = text::Tokenizer::find_in_dir(model_dir);
  if (!dtype_given)  // a quantized model is written at its blocks' format
    for (const auto& [path, layer] : model->linear_layers())
      if (const QuantizedWeight* q = layer->quantized_weight()) {
        dtype = quant_name(q->format);
        break;
      }
  const bool quantized = dtype == "q8_0" || dtype == "q4_0" || dtype == "q4_k";
  if (quantized) model->quantize(quant_from_name(dtype));  // the blocks written are the model's
  const models::GgufExportSummary s =
      models::save_gguf(*model, tokenizer.get(), out, {.dtype = dtype, .name = name});
  // Read back: the file must hold the weights (and the blocks) bit for bit; at f16/bf16 only
  // when the model has that dtype.
  auto back = models::load_gguf(out);
  std::string diff;
  if (dtype == "f32" || quantized || dtype_from_name(dtype) == model->weight_dtype())
    diff = first_difference(*back, *model);
  ZENITH_CHECK(diff.empty(), "[export] ", out, " read back differs from the model at ", diff);
  std::printf(
      "exported %s -> %s: GGUF v3, llama architecture, %s, %lld tensors, %lld metadata "
      "keys, vocabulary %s\n",
      model_dir.c_str(), out.c_str(), dtype.c_str(), (long long)s.tensors,
      (long long)s.metadata_keys, s.vocabulary.empty() ? "none" : s.vocabulary.c_str());
  return 0;
}

int run_export(int argc, char** argv) {
  std::string checkpoint, model_name, dataset_name, format = "onnx", out, dtype = "f32", name,
                                                    adapter;
  int64_t image_size = 0;
  bool no_fold = false;
  CLI::App app{"Export a checkpoint's inference graph for deployment (ONNX)", "zenith export"};
  app.add_option("--checkpoint", checkpoint, "checkpoint (.safetensors; onnx)");
  app.add_option("--model", model_name,
                 "onnx: zoo model (default: the checkpoint's); gguf: model directory");
  app.add_option("--dataset", dataset_name,
                 "dataset it was trained on (default: the checkpoint's): the input shape");
  app.add_option("--image-size", image_size, "input N x N (default: as trained)");
  app.add_option("--format", format, "onnx or gguf")->capture_default_str();
  auto* dtype_option =
      app.add_option(
             "--dtype", dtype,
             "gguf: tensor type of the matrices, f32, f16, bf16, or GGML blocks q8_0, q4_0, "
             "q4_k (a `zenith quantize` directory: its own)")
          ->capture_default_str();
  app.add_option("--name", name, "gguf: general.name (default: none)");
  app.add_option("--adapter", adapter,
                 "gguf: write this PEFT LoRA adapter of --model as a GGUF adapter file instead");
  app.add_option("--out", out, "output file")->required();
  app.add_flag("--no-fold-batch-norm", no_fold, "keep BatchNormalization nodes");
  if (auto exit_code = parse_args(app, argc, argv)) return *exit_code;
  ZENITH_CHECK(format == "onnx" || format == "gguf", "[export] unknown format '", format,
               "' (known: onnx, gguf)");
  if (format == "gguf")
    return export_gguf(model_name, out, dtype, dtype_option->count() > 0, name, adapter);
  ZENITH_CHECK(!checkpoint.empty(), "[export] --format onnx needs --checkpoint");

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

ZENITH_COMMAND("export", "Export an inference graph as ONNX, or a LLaMA model as GGUF", run_export);

}  // namespace zenith::cli
