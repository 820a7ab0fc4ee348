// Cell infrastructure: names, registration, train/eval, state dicts, repr, dtype conversion.
#include "support/op_check.h"

using namespace zenith;
using namespace zenith::testing;

namespace {

std::vector<std::string> names_of(const std::vector<std::pair<std::string, Tensor>>& named) {
  std::vector<std::string> out;
  for (auto& [n, _] : named) out.push_back(n);
  return out;
}

nn::CellPtr small_net() {
  return nn::SequentialCell({nn::Conv2d(1, 4, 3, 1, "valid"), nn::BatchNorm2d(4), nn::ReLU(),
                             nn::Flatten(), nn::Dense(4 * 4 * 4, 3)});
}

}  // namespace

TEST(Cell, SequentialNamesAndShapes) {
  auto net = small_net();
  EXPECT_EQ(names_of(net->named_parameters()),
            (std::vector<std::string>{"0.weight", "1.weight", "1.bias", "4.weight", "4.bias"}));
  EXPECT_EQ(names_of(net->named_buffers()),
            (std::vector<std::string>{"1.running_mean", "1.running_var", "1.num_batches_tracked"}));
  auto params = net->named_parameters();
  EXPECT_EQ(params[0].second.shape(), (Shape{4, 1, 3, 3}));
  EXPECT_EQ(params[3].second.shape(), (Shape{3, 64}));
  EXPECT_EQ(params[4].second.shape(), (Shape{3}));
  EXPECT_EQ(net->trainable_params().size(), 5u);
  EXPECT_EQ(net->num_parameters(), 36 + 4 + 4 + 192 + 3);
  for (auto& p : net->trainable_params()) {
    EXPECT_TRUE(p.requires_grad());
    EXPECT_TRUE(p.is_leaf());
  }
  auto sd = net->state_dict();
  EXPECT_EQ(sd.size(), 8u);
  EXPECT_TRUE(sd.count("1.running_var"));
}

TEST(Cell, NestedSequentialUsesDottedNames) {
  auto inner = nn::SequentialCell({nn::Dense(2, 3), nn::Tanh()});
  auto net = nn::SequentialCell({inner, nn::Dense(3, 1)});
  EXPECT_EQ(names_of(net->named_parameters()),
            (std::vector<std::string>{"0.0.weight", "0.0.bias", "1.weight", "1.bias"}));
  EXPECT_EQ(net->size(), 2u);
  EXPECT_EQ((*net)[0], inner);
}

// A cell assembled at run time, as the Python front end's Cell is: entries set by name.
class AssembledCell : public nn::Cell {
 public:
  Tensor forward(const Tensor& x) override { return x; }
  std::string type_name() const override { return "Assembled"; }
  using Cell::remove_entry;
  using Cell::set_cell;
  using Cell::set_parameter;
};

TEST(Cell, SetParameterAndCellRegisterOrReplaceInPlace) {
  AssembledCell cell;
  cell.set_parameter("scale", Tensor::ones({2}));
  cell.set_cell("dense", nn::Dense(2, 3));
  cell.set_parameter("shift", Tensor::zeros({1}), /*trainable=*/false);
  EXPECT_EQ(names_of(cell.named_parameters()),
            (std::vector<std::string>{"scale", "shift", "dense.weight", "dense.bias"}));
  EXPECT_EQ(cell.trainable_params().size(), 3u);
  Tensor replacement = Tensor::full({4}, 2.0);
  Tensor stored = cell.set_parameter("scale", replacement);
  EXPECT_TRUE(stored.is_same(replacement));                  // a leaf is kept as is, not copied
  EXPECT_EQ(names_of(cell.named_parameters())[0], "scale");  // same place in the order
  EXPECT_EQ(cell.state_dict().at("scale").shape(), (Shape{4}));
  cell.set_cell("dense", nn::Dense(2, 5));
  EXPECT_EQ(cell.state_dict().at("dense.bias").shape(), (Shape{5}));
  EXPECT_EQ(cell.named_children().size(), 1u);
  Tensor history = ops::mul(Tensor::ones({1}).requires_grad_(), 3.0);
  EXPECT_TRUE(cell.set_parameter("shift", history).is_leaf());  // history is cut
  EXPECT_TRUE(cell.remove_entry("shift"));
  EXPECT_TRUE(cell.remove_entry("dense"));
  EXPECT_FALSE(cell.remove_entry("dense"));
  EXPECT_EQ(names_of(cell.named_parameters()), (std::vector<std::string>{"scale"}));
  EXPECT_THROW(cell.set_cell("a.b", nn::ReLU()), Error);
  EXPECT_THROW(cell.set_cell("relu", nullptr), Error);
}

TEST(Cell, TrainEvalPropagatesToChildren) {
  auto inner = nn::SequentialCell({nn::Dropout(0.5)});
  auto net = nn::SequentialCell({inner, nn::BatchNorm2d(2)});
  EXPECT_TRUE(net->training());
  net->set_train(false);
  EXPECT_FALSE(inner->training());
  EXPECT_FALSE((*inner)[0]->training());
  EXPECT_FALSE((*net)[1]->training());
  net->train();
  EXPECT_TRUE((*inner)[0]->training());
  net->eval();
  EXPECT_FALSE((*net)[1]->training());
}

TEST(Cell, StateDictRoundTripKeepsHandles) {
  manual_seed(1);
  auto a = small_net();
  auto b = small_net();
  auto handles = b->trainable_params();
  EXPECT_FALSE(all_close(a->state_dict().at("0.weight"), b->state_dict().at("0.weight")));
  b->load_state_dict(a->state_dict());
  for (auto& [name, t] : a->state_dict())
    EXPECT_TRUE(all_close(b->state_dict().at(name), t, 0, 0)) << name;
  // The optimizer's handles see the loaded values (copied in place, not replaced).
  EXPECT_TRUE(all_close(handles[0], a->state_dict().at("0.weight"), 0, 0));
  // The state dict shares storage with the cell.
  Tensor w = b->state_dict().at("4.bias");
  w.fill_(7.0);
  EXPECT_DOUBLE_EQ(b->named_parameters()[4].second.to_double_vector()[0], 7.0);
}

TEST(Cell, LoadStateDictListsEveryProblem) {
  auto net = small_net();
  auto sd = net->state_dict();
  sd.erase("0.weight");
  sd.erase("1.running_var");
  sd["4.bias"] = Tensor::zeros({5});
  sd["extra.weight"] = Tensor::zeros({2, 2});
  try {
    net->load_state_dict(sd);
    FAIL() << "did not throw";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("[load_state_dict]"), std::string::npos) << m;
    EXPECT_NE(m.find("missing (2)"), std::string::npos) << m;
    EXPECT_NE(m.find("0.weight [4, 1, 3, 3]"), std::string::npos) << m;
    EXPECT_NE(m.find("1.running_var [4]"), std::string::npos) << m;
    EXPECT_NE(m.find("unexpected (1)"), std::string::npos) << m;
    EXPECT_NE(m.find("extra.weight [2, 2]"), std::string::npos) << m;
    EXPECT_NE(m.find("4.bias: checkpoint [5], model [3]"), std::string::npos) << m;
  }
}

TEST(Cell, NonStrictLoadIgnoresMissingAndUnexpected) {
  auto net = small_net();
  nn::StateDict sd;
  sd["4.bias"] = Tensor::full({3}, 2.0);
  sd["other"] = Tensor::zeros({1});
  net->load_state_dict(sd, /*strict=*/false);
  EXPECT_EQ(net->state_dict().at("4.bias").to_double_vector(), (std::vector<double>{2, 2, 2}));
  sd["4.bias"] = Tensor::zeros({4});
  EXPECT_TRUE(throws_with([&] { net->load_state_dict(sd, false); }, "mis-shaped (1)"));
}

TEST(Cell, LoadConvertsDtype) {
  auto net = nn::SequentialCell({nn::Dense(2, 2)});
  nn::StateDict sd;
  sd["0.weight"] = Tensor::from_vector(std::vector<double>{1, 2, 3, 4}, {2, 2});
  sd["0.bias"] = Tensor::from_vector(std::vector<double>{5, 6}, {2});
  net->load_state_dict(sd);
  EXPECT_EQ(net->state_dict().at("0.weight").dtype(), DType::f32);
  EXPECT_EQ(net->state_dict().at("0.weight").to_double_vector(), (std::vector<double>{1, 2, 3, 4}));
}

TEST(Cell, Repr) {
  auto net = nn::SequentialCell({nn::Conv2d(3, 32, 3, 1, "valid"), nn::ReLU(), nn::MaxPool2d(2),
                                 nn::Flatten(), nn::Dense(10, 2)});
  std::string r = net->repr();
  EXPECT_NE(r.find("SequentialCell(\n"), std::string::npos) << r;
  EXPECT_NE(r.find("  (0): Conv2d(3, 32, kernel_size=3, stride=1, pad_mode=valid"),
            std::string::npos)
      << r;
  EXPECT_NE(r.find("  (1): ReLU()"), std::string::npos) << r;
  EXPECT_NE(r.find("  (2): MaxPool2d(kernel_size=2, stride=2)"), std::string::npos) << r;
  EXPECT_NE(r.find("  (4): Dense(in_channels=10, out_channels=2, has_bias=true)"),
            std::string::npos)
      << r;
}

TEST(Cell, ToDtypeKeepsHandles) {
  auto net = small_net();
  auto handles = net->trainable_params();
  net->to(DType::f64);
  EXPECT_EQ(handles[0].dtype(), DType::f64);
  EXPECT_TRUE(handles[0].requires_grad());
  EXPECT_EQ(net->state_dict().at("1.running_mean").dtype(), DType::f64);
  EXPECT_EQ(net->state_dict().at("1.num_batches_tracked").dtype(), DType::i64);
}

TEST(Cell, ConvArgumentErrors) {
  EXPECT_TRUE(throws_with([] { nn::Conv2d(3, 8, 3, 1, "full"); }, "[Conv2d] pad_mode"));
  EXPECT_TRUE(throws_with([] { nn::Conv2d(3, 8, 3, 1, "same", 1); }, "needs pad_mode 'pad'"));
  EXPECT_TRUE(throws_with([] { nn::Conv2d(3, 8, 3, 1, "same", 0, 1, 2); }, "divisible by group"));
}

// SequentialCell runs ReLU + MaxPool2d as pooling then relu: same values and gradients as the
// two ops in the written order, with a window whose elements are all negative and with padding,
// behind a convolution (oneDNN blocked activations) and on plain tensors, in f32 and f64.
TEST(Cell, ReluMaxPoolOrderIsExact) {
  for (DType dt : {DType::f32, DType::f64}) {
    for (bool with_conv : {false, true}) {
      manual_seed(3);
      auto conv = nn::Conv2d(2, 4, 3, 1, "pad", 1);
      conv->to(dt);
      auto relu = nn::ReLU();
      auto pool = nn::MaxPool2d(3, 2, 1);
      std::vector<nn::CellPtr> cells = {relu, pool};
      if (with_conv) cells.insert(cells.begin(), conv);
      auto net = nn::SequentialCell(cells);
      Tensor x0 = random_input({2, 2, 9, 9}, dt);
      Tensor w = random_input({2, 4, 5, 5}, dt);  // weights of the output elements
      if (!with_conv) x0 = ops::sub(ops::mul(random_input({2, 4, 9, 9}, dt), 0.5), 0.25);
      auto run = [&](bool sequential) {
        Tensor x = x0.clone().requires_grad_();
        Tensor h = with_conv ? conv->forward(x) : x;
        Tensor y = sequential ? net->forward(x) : pool->forward(relu->forward(h));
        ops::sum(ops::mul(y, w)).backward();
        Tensor gw = with_conv ? conv->named_parameters()[0].second.grad().clone() : Tensor();
        if (with_conv) conv->named_parameters()[0].second.zero_grad();
        return std::tuple{y.detach(), x.grad(), gw};
      };
      auto [y1, gx1, gw1] = run(true);
      auto [y2, gx2, gw2] = run(false);
      EXPECT_TRUE(all_close(y1, y2, 0, 0)) << dtype_name(dt) << " conv " << with_conv;
      EXPECT_TRUE(all_close(gx1, gx2, 1e-6, 1e-7)) << dtype_name(dt) << " conv " << with_conv;
      if (with_conv) EXPECT_TRUE(all_close(gw1, gw2, 1e-6, 1e-7)) << dtype_name(dt);
      // some windows really were all negative before the relu
      Tensor h = with_conv ? conv->forward(x0) : x0;
      Tensor pooled = ops::max_pool2d(h.detach(), {3, 3}, {2, 2}, {1, 1});
      EXPECT_GT(ops::sum(ops::lt(pooled, Tensor::zeros({}, dt))).to(DType::f64).item(), 0.0);
    }
  }
}
