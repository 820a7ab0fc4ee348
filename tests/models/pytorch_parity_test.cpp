// zenith against PyTorch 1.13 on the same networks, weights and inputs (fixtures written by
// scripts/make_fixtures.py): forward logits, loss, every parameter gradient, and a short
// Momentum run.
//
// Tolerance, float32 on both sides: |zenith - torch| <= 1e-4 * |torch| + atol per element, with
// atol = 1e-5 * max|torch| over the compared tensor. Elements near zero are sums of terms that
// cancel, so their rounding error scales with the size of those terms (about the tensor's
// largest values), not with their own: a purely relative bound would fail on them for two
// correct implementations that sum in different orders. For ResNet-18, whose gradients are
// compared through their L2 norm (rtol 1e-4) and 8 sampled entries each, atol is 1e-5 times the
// norm. Its fixture input keeps layer4's ReLU inputs clear of zero (see make_fixtures.py): a
// float32 rounding flip there would move a whole channel's gradient. ResNet-18 is also compared
// in float64, where the tolerance can be 1e-9.
#include <cmath>

#include "support/op_check.h"
#include "zenith/io.h"

using namespace zenith;
using namespace zenith::testing;

namespace {

std::map<std::string, Tensor> load_fixture(const std::string& name, io::Metadata* meta = nullptr) {
  return io::load_safetensors(std::string(ZENITH_FIXTURE_DIR) + "/" + name, meta);
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (double v : t.to_double_vector()) m = std::max(m, std::abs(v));
  return m;
}

::testing::AssertionResult matches_torch(const Tensor& got, const Tensor& ref, double rtol = 1e-4) {
  return all_close(got, ref, rtol, 1e-5 * max_abs(ref));
}

// ---- SeedCNN: weights, batch and every gradient are in the fixture.
void check_seed_cnn(const std::string& fixture, int64_t in_channels, int64_t image_size) {
  auto fx = load_fixture(fixture);
  auto net = models::seed_cnn(in_channels, image_size, 10);
  nn::StateDict weights;
  for (auto& [name, t] : fx)
    if (name.rfind("weight.", 0) == 0) weights[name.substr(7)] = t;
  net->load_state_dict(weights);  // strict: the architectures and names agree

  auto loss_fn = nn::SoftmaxCrossEntropyWithLogits(true, "mean");
  Tensor x = fx.at("input"), labels = fx.at("labels");
  Tensor logits = net->forward(x);
  EXPECT_TRUE(matches_torch(logits, fx.at("logits"))) << "logits";
  Tensor loss = loss_fn->forward(logits, labels);
  EXPECT_TRUE(matches_torch(loss, fx.at("loss"))) << "loss";
  loss.backward();
  for (auto& [name, p] : net->named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    EXPECT_TRUE(matches_torch(p.grad(), fx.at("grad." + name))) << "gradient of " << name;
  }

  // Ten Momentum steps on the same batch: the loss after each.
  auto opt = nn::Momentum(net->trainable_params(), 0.01, 0.9);
  std::vector<double> ref = fx.at("momentum_losses").to_double_vector();
  ASSERT_EQ(ref.size(), 11u);
  for (size_t step = 1; step < ref.size(); ++step) {
    opt->step();
    opt->zero_grad();
    Tensor l = loss_fn->forward(net->forward(x), labels);
    l.backward();
    EXPECT_NEAR(l.item(), ref[step], 1e-4 * std::abs(ref[step])) << "after step " << step;
  }
}

// ---- ResNet-18: weights from a formula both sides compute (make_fixtures.py, resnet_weight).
uint64_t splitmix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// n values in [-1, 1) from splitmix64(i + stream * 2^32), as hash_uniform in the script.
std::vector<double> hash_uniform(int64_t n, uint64_t stream) {
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    out[size_t(i)] = double(splitmix64(uint64_t(i) + (stream << 32)) >> 11) * 0x1.0p-53 * 2.0 - 1.0;
  return out;
}

Tensor resnet_weight(const std::string& name, const Shape& shape, uint64_t k) {
  std::vector<double> v = hash_uniform(shape_numel(shape), k + 1);
  for (double& e : v) {
    if (shape.size() == 4)
      e *= std::sqrt(6.0 / double(shape[1] * shape[2] * shape[3]));
    else if (name == "fc.weight" || name == "fc.bias")
      e /= std::sqrt(512.0);
    else if (name.ends_with(".weight"))
      e = 1.0 + 0.2 * e;
    else
      e = 0.2 * e;
  }
  return Tensor::from_vector(v, shape, DType::f32);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out(1);
  for (char c : s) {
    if (c == sep)
      out.emplace_back();
    else
      out.back() += c;
  }
  return out;
}

// Runs ResNet-18 with the formula weights in `dtype`; checks against the fixture entries with
// `prefix` ("" for float32, "f64." for float64) at relative tolerance `rtol`.
void check_resnet18(DType dtype, const std::string& prefix, double rtol) {
  io::Metadata meta;
  auto fx = load_fixture("resnet18_cifar.safetensors", &meta);
  auto net = models::resnet18(3, 10);
  auto params = net->named_parameters();
  // The formula indexes parameters in PyTorch's named_parameters order; ours must agree.
  std::vector<std::string> order = split(meta.at("param_order"), ',');
  ASSERT_EQ(order.size(), params.size());
  {
    NoGradGuard g;
    for (size_t k = 0; k < params.size(); ++k) {
      ASSERT_EQ(params[k].first, order[k]);
      params[k].second.copy_(resnet_weight(params[k].first, params[k].second.shape(), k));
    }
  }
  net->to(dtype);
  Tensor x = fx.at("input").to(dtype);
  auto close = [&](const Tensor& got, const Tensor& ref) {
    return all_close(got, ref, rtol, 0.1 * rtol * max_abs(ref));
  };
  net->train();
  Tensor logits = net->forward(x);
  EXPECT_TRUE(close(logits, fx.at(prefix + "logits"))) << "logits";
  Tensor loss = nn::SoftmaxCrossEntropyWithLogits(true)->forward(logits, fx.at("labels"));
  EXPECT_TRUE(close(loss, fx.at(prefix + "loss"))) << "loss";
  loss.backward();
  for (auto& [name, p] : params) {
    ASSERT_TRUE(p.grad().defined()) << name;
    std::vector<double> g = p.grad().to_double_vector();
    double norm = 0;
    for (double e : g) norm += e * e;
    norm = std::sqrt(norm);
    double ref_norm = fx.at(prefix + "grad_norm." + name).item();
    EXPECT_NEAR(norm, ref_norm, rtol * ref_norm) << "gradient norm of " << name;
    std::vector<int64_t> idx = fx.at("grad_idx." + name).to_int_vector();
    std::vector<double> ref = fx.at(prefix + "grad_val." + name).to_double_vector();
    for (size_t i = 0; i < idx.size(); ++i)
      EXPECT_NEAR(g[size_t(idx[i])], ref[i], rtol * std::abs(ref[i]) + 0.1 * rtol * ref_norm)
          << name << "[" << idx[i] << "]";
  }
  if (dtype != DType::f32) return;
  auto state = net->state_dict();
  for (const char* b : {"bn1.running_mean", "bn1.running_var", "layer4.1.bn2.running_mean",
                        "layer4.1.bn2.running_var"})
    EXPECT_TRUE(close(state.at(b), fx.at(std::string("buffer.") + b))) << b;
  net->eval();
  NoGradGuard g;
  EXPECT_TRUE(close(net->forward(x), fx.at("logits_eval"))) << "eval logits";
}

}  // namespace

TEST(PyTorchParity, SeedCnnCifar) { check_seed_cnn("seedcnn_cifar.safetensors", 3, 32); }

TEST(PyTorchParity, SeedCnnFashionMnist) { check_seed_cnn("seedcnn_fmnist.safetensors", 1, 28); }

// float32 on both sides, as SeedCNN.
TEST(PyTorchParity, ResNet18CifarBatch2Float32) { check_resnet18(DType::f32, "", 1e-4); }

// float64 on both sides: rounding no longer hides anything, so the architecture and every
// backward formula must agree to 1e-9.
TEST(PyTorchParity, ResNet18CifarBatch2Float64) { check_resnet18(DType::f64, "f64.", 1e-9); }
