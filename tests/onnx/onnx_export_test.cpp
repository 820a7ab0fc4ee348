// ONNX export of the zoo CNNs (src/onnx/onnx_export.cpp), the file format (onnx_proto.cpp) read
// back by the onnx library itself (its generated classes, checker and strict shape inference),
// BatchNorm folding, and zenith's ONNX interpreter (onnx_runtime.cpp) against the network.
#include "onnx/onnx_export.h"

#include <gtest/gtest.h>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include "core/dispatch.h"
#include "onnx/onnx_runtime.h"
#include "support/temp_dir.h"
#include "zenith/zenith.h"

namespace zenith::onnx {
namespace {

double max_abs_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  const auto x = a.to_double_vector(), y = b.to_double_vector();
  double d = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) d = std::max(d, std::abs(x[i] - y[i]));
  return d;
}

Tensor eval_forward(nn::Cell& net, const Tensor& x) {
  NoGradGuard no_grad;
  net.set_train(false);
  return net.forward(x);
}

// The onnx library parses the bytes with its generated classes, checks the model, and infers
// every value's shape in strict mode (a node whose inputs do not fit its op throws); returns the
// parsed model with the inferred shapes.
::onnx::ModelProto onnx_library_reading(const std::string& bytes) {
  ::onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromString(bytes));
  ::onnx::checker::check_model(m);
  ::onnx::shape_inference::InferShapes(m, ::onnx::OpSchemaRegistry::Instance(),
                                       ::onnx::ShapeInferenceOptions(true, 1, false));
  return m;
}

// Random running statistics and affine parameters for every batch norm, as a trained net has.
void randomize_batch_norms(nn::Cell& net) {
  for (auto& [name, t] : net.named_buffers()) {
    if (name.ends_with("running_mean")) t.copy_(Tensor::randn(t.shape()) * 0.2);
    if (name.ends_with("running_var")) t.copy_(Tensor::uniform(t.shape(), 0.5, 2.0));
  }
  for (auto& [name, t] : net.named_parameters())
    if (t.dim() == 1 && name.find("bn") != std::string::npos) {
      NoGradGuard no_grad;
      t.copy_(Tensor::uniform(t.shape(), 0.5, 1.5));
    }
}

TEST(OnnxExport, SeedCnnIsConvReluPoolFlattenGemm) {
  manual_seed(1);
  auto net = models::seed_cnn(1, 28, 10);
  OnnxGraph g = export_onnx(*net, {1, 28, 28}, {.metadata = {{"zenith.arch", "seedcnn"}}});
  EXPECT_EQ(g.op_counts(),
            (std::map<std::string, int64_t>{
                {"Conv", 2}, {"Relu", 2}, {"MaxPool", 2}, {"Flatten", 1}, {"Gemm", 1}}));
  ASSERT_EQ(g.inputs.size(), 1u);
  EXPECT_EQ(g.inputs[0].shape, (Shape{-1, 1, 28, 28}));
  EXPECT_EQ(g.outputs[0].shape, (Shape{-1, 10}));
  std::set<std::string> names;
  for (const auto& [name, t] : g.initializers) names.insert(name);
  EXPECT_EQ(names, (std::set<std::string>{"0.weight", "3.weight", "7.weight", "7.bias"}));
  EXPECT_TRUE(net->training());  // the mode is restored

  const std::string bytes = serialize_onnx(g);
  ::onnx::ModelProto m = onnx_library_reading(bytes);
  EXPECT_EQ(m.ir_version(), 8);
  EXPECT_EQ(m.opset_import(0).version(), 17);
  EXPECT_EQ(m.graph().node_size(), 8);
  EXPECT_GE(m.graph().value_info_size(), 7);  // every intermediate value's shape inferred
  bool has_arch = false;
  for (const auto& p : m.metadata_props()) has_arch |= p.key() == "zenith.arch";
  EXPECT_TRUE(has_arch);

  // Any batch size runs (the batch dim is symbolic).
  Tensor x = Tensor::randn({5, 1, 28, 28});
  EXPECT_LT(
      max_abs_diff(eval_forward(*net, x), OnnxModel(parse_onnx(bytes, "seedcnn")).run({x})[0]),
      1e-5);
}

TEST(OnnxExport, LeNetPadsItsFirstConv) {
  manual_seed(2);
  auto net = models::lenet5(1, 28, 10);
  OnnxGraph g = export_onnx(*net, {1, 28, 28});
  EXPECT_EQ(g.op_counts()["Gemm"], 3);
  EXPECT_EQ(g.op_counts()["Relu"], 4);
  EXPECT_EQ(g.nodes[0].ints_attr("pads", {}), (std::vector<int64_t>{2, 2, 2, 2}));
  const std::string bytes = serialize_onnx(g);
  onnx_library_reading(bytes);
  Tensor x = Tensor::randn({3, 1, 28, 28});
  EXPECT_LT(max_abs_diff(eval_forward(*net, x), OnnxModel(parse_onnx(bytes, "lenet")).run({x})[0]),
            1e-5);
}

TEST(OnnxExport, ResNet18FoldsEveryBatchNormIntoItsConv) {
  manual_seed(3);
  auto net = models::resnet18(3, 10);
  randomize_batch_norms(*net);
  Tensor x = Tensor::randn({2, 3, 32, 32});
  const Tensor expected = eval_forward(*net, x);

  OnnxExportOptions keep;
  keep.fold_batch_norm = false;
  OnnxGraph kept = export_onnx(*net, {3, 32, 32}, keep);
  EXPECT_EQ(kept.op_counts()["BatchNormalization"], 20);
  OnnxGraph folded = export_onnx(*net, {3, 32, 32});
  auto counts = folded.op_counts();
  EXPECT_EQ(counts.count("BatchNormalization"), 0u);
  EXPECT_EQ(counts["Conv"], 20);
  EXPECT_EQ(counts["Add"], 8);  // the residual connections
  EXPECT_EQ(counts["GlobalAveragePool"], 1);
  EXPECT_EQ(folded.metadata["zenith.batch_norms_folded"], "20");
  EXPECT_EQ(folded.nodes.size(), kept.nodes.size() - 20);
  for (const auto& [name, t] : folded.initializers)
    EXPECT_EQ(name.find("running"), std::string::npos) << name;  // folded away
  for (const OnnxGraph* g : {&kept, &folded}) {
    const std::string bytes = serialize_onnx(*g);
    onnx_library_reading(bytes);
    EXPECT_LT(max_abs_diff(expected, OnnxModel(parse_onnx(bytes, "resnet18")).run({x})[0]), 1e-4);
  }
}

TEST(OnnxExport, FileRoundTripKeepsGraphInitializersAndMetadata) {
  zenith::testing::TempDir dir("onnx_roundtrip");
  manual_seed(4);
  auto net = models::seed_cnn(3, 32, 10);
  OnnxGraph g = export_onnx(*net, {3, 32, 32}, {.graph_name = "seed", .metadata = {{"k", "v"}}});
  write_onnx(g, dir.str() + "/m.onnx");
  OnnxGraph back = read_onnx(dir.str() + "/m.onnx");
  EXPECT_EQ(back.name, "seed");
  EXPECT_EQ(back.metadata["k"], "v");
  ASSERT_EQ(back.nodes.size(), g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    EXPECT_EQ(back.nodes[i].op_type, g.nodes[i].op_type);
    EXPECT_EQ(back.nodes[i].inputs, g.nodes[i].inputs);
    EXPECT_EQ(back.nodes[i].outputs, g.nodes[i].outputs);
    EXPECT_EQ(back.nodes[i].attrs, g.nodes[i].attrs);
  }
  ASSERT_EQ(back.initializers.size(), g.initializers.size());
  for (size_t i = 0; i < g.initializers.size(); ++i)
    EXPECT_EQ(max_abs_diff(back.initializers[i].second, g.initializers[i].second), 0.0);
  EXPECT_EQ(back.inputs[0].shape, (Shape{-1, 3, 32, 32}));
  EXPECT_EQ(serialize_onnx(back), serialize_onnx(g));
}

TEST(OnnxRuntime, ReadsWhatTheOnnxLibraryWrites) {
  // A graph built with the generated classes (float_data and packed ints, as other exporters
  // write): Gemm(x, W, b, transB) -> Softmax.
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  auto* gemm = g->add_node();
  gemm->set_op_type("Gemm");
  for (const char* in : {"x", "W", "b"}) gemm->add_input(in);
  gemm->add_output("h");
  auto* trans = gemm->add_attribute();
  trans->set_name("transB");
  trans->set_type(::onnx::AttributeProto::INT);
  trans->set_i(1);
  auto* softmax = g->add_node();
  softmax->set_op_type("Softmax");
  softmax->add_input("h");
  softmax->add_output("y");
  auto add_tensor = [&](const char* name, Shape dims, std::vector<float> v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::FLOAT);
    for (auto d : dims) t->add_dims(d);
    for (float f : v) t->add_float_data(f);
  };
  add_tensor("W", {2, 3}, {1, 0, 0, 0, 1, 1});
  add_tensor("b", {2}, {0.5f, -0.5f});
  for (auto* list : {g->add_input(), g->add_output()}) {
    list->set_name(list == &g->input(0) ? "x" : "y");
    auto* tt = list->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(::onnx::TensorProto::FLOAT);
    tt->mutable_shape()->add_dim()->set_dim_param("n");
    tt->mutable_shape()->add_dim()->set_dim_value(list == &g->input(0) ? 3 : 2);
  }
  std::string bytes;
  ASSERT_TRUE(m.SerializeToString(&bytes));
  OnnxModel model(parse_onnx(bytes, "handmade"));
  Tensor y = model.run({Tensor::from_vector(std::vector<float>{1, 2, 3}, {1, 3})})[0];
  // h = [1 + 0.5, 5 - 0.5] = [1.5, 4.5]
  const double e = std::exp(-3.0);
  auto v = y.to_double_vector();
  EXPECT_NEAR(v[0], e / (1 + e), 1e-6);
  EXPECT_NEAR(v[1], 1 / (1 + e), 1e-6);
}

class GeluNet : public nn::Cell {
 public:
  Tensor forward(const Tensor& x) override { return ops::gelu(x); }
  std::string type_name() const override { return "GeluNet"; }
};
class TransposeNet : public nn::Cell {
 public:
  Tensor forward(const Tensor& x) override { return ops::relu(ops::relu(x).transpose(1, 2)); }
  std::string type_name() const override { return "TransposeNet"; }
};

TEST(OnnxExport, WhatHasNoMappingFailsNamingIt) {
  GeluNet gelu;
  try {
    export_onnx(gelu, {4});
    FAIL() << "gelu exported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[export] op gelu has no ONNX mapping"), std::string::npos)
        << e.what();
  }
  TransposeNet transpose;
  try {
    export_onnx(transpose, {3, 4});
    FAIL() << "a transposing view exported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("that is not a reshape"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(dispatch::observed());  // the tracer is gone after a failure too
}

TEST(OnnxRuntime, RefusesOpsItCannotRun) {
  OnnxGraph g;
  g.inputs = {{"x", {-1, 4}}};
  g.outputs = {{"y", {-1, 4}}};
  g.nodes = {{"LSTM", "lstm_1", {"x"}, {"y"}, {}}};
  try {
    OnnxModel model(g);
    FAIL() << "LSTM accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("op LSTM (node 'lstm_1') is not supported"),
              std::string::npos)
        << e.what();
  }
  g.nodes = {{"Relu", "r", {"z"}, {"y"}, {}}};
  EXPECT_THROW(OnnxModel{g}, Error);  // reads a value nothing writes
}

TEST(FoldBatchNorms, OnlyAConvOutputReadByTheBatchNormAlone) {
  manual_seed(5);
  OnnxGraph g;
  g.inputs = {{"x", {-1, 2, 4, 4}}};
  g.outputs = {{"y", {-1, 3, 4, 4}}, {"c", {-1, 3, 4, 4}}};
  g.initializers = {{"w", Tensor::randn({3, 2, 1, 1})},
                    {"gamma", Tensor::rand({3})},
                    {"beta", Tensor::randn({3})},
                    {"mean", Tensor::randn({3})},
                    {"var", Tensor::uniform({3}, 0.5, 1.5)}};
  g.nodes = {{"Conv", "conv", {"x", "w"}, {"c"}, {}},
             {"BatchNormalization", "bn", {"c", "gamma", "beta", "mean", "var"}, {"y"}, {}}};
  OnnxGraph output_too = g;
  EXPECT_EQ(fold_batch_norms(output_too), 0);  // c is also a graph output
  g.outputs.pop_back();
  Tensor x = Tensor::randn({2, 2, 4, 4});
  const Tensor expected = OnnxModel(g).run({x})[0];
  EXPECT_EQ(fold_batch_norms(g), 1);
  EXPECT_EQ(g.op_counts(), (std::map<std::string, int64_t>{{"Conv", 1}}));
  EXPECT_EQ(g.initializers.size(), 2u);  // w and its new bias
  EXPECT_LT(max_abs_diff(expected, OnnxModel(g).run({x})[0]), 1e-5);
}

}  // namespace
}  // namespace zenith::onnx
