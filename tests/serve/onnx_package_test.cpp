// Packages of exported ONNX graphs (`zenith deploy --model model.onnx`): described by the file's
// metadata and shapes, hashed like weights, and answering over HTTPS like the checkpoint they
// were exported from.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "onnx/onnx_export.h"
#include "platform/deployments/deployment_store.h"
#include "serve/package.h"
#include "serve_test_util.h"
#include "support/temp_dir.h"

namespace zenith::serve {
namespace {

using nlohmann::json;
using zenith::testing::TempDir;

// A ResNet-18 checkpoint with trained-looking batch norm statistics, and its export.
struct Exported {
  std::string checkpoint, onnx;
};
Exported export_resnet(const std::string& dir) {
  manual_seed(11);
  auto net = models::resnet18(1, 10);
  for (auto& [name, t] : net->named_buffers()) {
    if (name.ends_with("running_mean")) t.copy_(Tensor::randn(t.shape()) * 0.1);
    if (name.ends_with("running_var")) t.copy_(Tensor::uniform(t.shape(), 0.5, 2.0));
  }
  Exported e{dir + "/checkpoint_epoch_3.safetensors", dir + "/resnet18.onnx"};
  io::save_checkpoint(
      e.checkpoint, *net, nullptr,
      {{"config", R"({"model": "resnet18", "dataset": "fashion-mnist"})"}, {"epoch", "3"}});
  onnx::write_onnx(onnx::export_onnx(*net, {1, 28, 28},
                                     {.metadata = {{"zenith.arch", "resnet18"},
                                                   {"zenith.dataset", "fashion-mnist"},
                                                   {"zenith.epoch", "3"}}}),
                   e.onnx);
  return e;
}

TEST(OnnxPackage, AnswersLikeTheCheckpointItWasExportedFrom) {
  TempDir dir("onnx_package");
  const Exported e = export_resnet(dir.str());
  auto from_onnx = write_package(e.onnx, dir.str() + "/onnx_pkg", "fmnist-onnx");
  auto from_ckpt = write_package(e.checkpoint, dir.str() + "/ckpt_pkg", "fmnist");
  EXPECT_EQ(from_onnx.model_file, "model.onnx");
  EXPECT_EQ(from_onnx.arch, "resnet18");
  EXPECT_EQ(from_onnx.epoch, 3);
  EXPECT_EQ(from_onnx.channels, 1);
  EXPECT_EQ(from_onnx.image_size, 28);
  EXPECT_EQ(from_onnx.num_classes, 10);
  EXPECT_EQ(from_onnx.labels, from_ckpt.labels);
  EXPECT_EQ(from_onnx.mean, from_ckpt.mean);
  EXPECT_TRUE(std::filesystem::exists(dir.str() + "/onnx_pkg/model.onnx"));
  EXPECT_FALSE(std::filesystem::exists(dir.str() + "/onnx_pkg/weights.safetensors"));

  auto spec = read_package(dir.str() + "/onnx_pkg");
  EXPECT_EQ(spec.model_file, "model.onnx");
  EXPECT_EQ(spec.sha256, from_onnx.sha256);
  auto graph_net = load_network(dir.str() + "/onnx_pkg", spec);
  auto ckpt_net = load_network(dir.str() + "/ckpt_pkg", read_package(dir.str() + "/ckpt_pkg"));
  EXPECT_EQ(graph_net->type_name(), "OnnxGraph");
  NoGradGuard no_grad;
  Tensor x = Tensor::randn({4, 1, 28, 28});
  auto a = ckpt_net->forward(x).to_double_vector(), b = graph_net->forward(x).to_double_vector();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-4) << i;

  // Over HTTPS: the same request to both services gets the same outputs.
  ServeOptions options;
  options.tls_dir = dir.str() + "/tls";
  options.token_db = dir.str() + "/tokens.db";
  platform::DeploymentStore store(options.token_db);
  const std::map<std::string, std::string> tokens = {
      {"fmnist", store.create_token("fmnist").second},
      {"fmnist-onnx", store.create_token("fmnist-onnx").second}};
  test::RunningServer onnx_service(dir.str() + "/onnx_pkg", options);
  test::RunningServer ckpt_service(dir.str() + "/ckpt_pkg", options);
  const std::vector<float> pixels = Tensor::rand({2, 1, 28, 28}).to_float_vector();
  json request = {
      {"inputs",
       {{{"name", "input"}, {"shape", {2, 1, 28, 28}}, {"datatype", "FP32"}, {"data", pixels}}}}};
  auto infer = [&](const test::RunningServer& s, const std::string& model) {
    auto r = s.client(tokens.at(model))
                 ->Post("/v2/models/" + model + "/infer", request.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no response");
    return json::parse(r ? r->body : "{}");
  };
  json ra = infer(ckpt_service, "fmnist"), rb = infer(onnx_service, "fmnist-onnx");
  auto ya = ra["outputs"][0]["data"].get<std::vector<double>>();
  auto yb = rb["outputs"][0]["data"].get<std::vector<double>>();
  ASSERT_EQ(ya.size(), 20u);
  ASSERT_EQ(yb.size(), ya.size());
  for (size_t i = 0; i < ya.size(); ++i) EXPECT_NEAR(ya[i], yb[i], 1e-4) << i;
}

TEST(OnnxPackage, ModifiedGraphIsRefusedAndUnknownModelFilesToo) {
  TempDir dir("onnx_package_tamper");
  manual_seed(13);
  auto net = models::seed_cnn(1, 28, 10);
  const std::string onnx = dir.str() + "/seedcnn.onnx";
  onnx::write_onnx(onnx::export_onnx(*net, {1, 28, 28},
                                     {.metadata = {{"zenith.arch", "seedcnn"},
                                                   {"zenith.dataset", "fashion-mnist"}}}),
                   onnx);
  write_package(onnx, dir.str() + "/pkg", "m");
  {
    std::fstream f(dir.str() + "/pkg/model.onnx", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-5, std::ios::end);
    f.put('\x42');
  }
  EXPECT_THROW(read_package(dir.str() + "/pkg"), std::exception);
  json manifest = json::parse(std::ifstream(dir.str() + "/pkg/package.json"));
  manifest["model_file"] = "../../etc/passwd";
  std::ofstream(dir.str() + "/pkg/package.json") << manifest.dump();
  try {
    read_package(dir.str() + "/pkg");
    FAIL() << "a package naming another file was read";
  } catch (const std::exception& ex) {
    EXPECT_NE(std::string(ex.what()).find("unknown model_file"), std::string::npos) << ex.what();
  }
}

TEST(OnnxPackage, AGraphWithoutItsDatasetNeedsDataset) {
  TempDir dir("onnx_package_dataset");
  manual_seed(12);
  auto net = models::seed_cnn(1, 28, 10);
  onnx::write_onnx(onnx::export_onnx(*net, {1, 28, 28}), dir.str() + "/plain.onnx");
  try {
    write_package(dir.str() + "/plain.onnx", dir.str() + "/pkg", "m");
    FAIL() << "packaged without knowing its preprocessing";
  } catch (const Error& ex) {
    EXPECT_NE(std::string(ex.what()).find("pass --dataset"), std::string::npos) << ex.what();
  }
  auto spec = write_package(dir.str() + "/plain.onnx", dir.str() + "/pkg", "m",
                            {.dataset = "fashion-mnist"});
  EXPECT_EQ(spec.arch, "onnx");
  EXPECT_EQ(spec.labels[0], "T-shirt/top");
}

}  // namespace
}  // namespace zenith::serve
