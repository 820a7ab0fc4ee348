// Optimizers: the first steps against the update formulas (PyTorch's docs) evaluated in float64
// here, on float32 parameters; checkpoints of optimizer state.
#include <cmath>

#include "support/op_check.h"

using namespace zenith;
using namespace zenith::testing;

namespace {

constexpr int kSteps = 4;
constexpr int64_t kN = 40000;  // above the kernels' parallel grain

struct Case {
  std::vector<double> p0;
  std::vector<std::vector<double>> grads;  // one per step
};

Case make_case(uint64_t seed) {
  manual_seed(seed);
  Case c;
  c.p0 = Tensor::uniform({kN}, -1, 1, DType::f64).to_double_vector();
  for (int s = 0; s < kSteps; ++s)
    c.grads.push_back(Tensor::uniform({kN}, -1, 1, DType::f64).to_double_vector());
  return c;
}

// Runs `opt` over the case's gradients and returns the float32 parameter after each step.
std::vector<Tensor> run(const Case& c, Tensor& p, nn::Optimizer& opt) {
  std::vector<Tensor> out;
  for (int s = 0; s < kSteps; ++s) {
    p.set_grad(Tensor::from_vector(c.grads[size_t(s)], {kN}, DType::f32));
    opt.step();
    opt.zero_grad();
    EXPECT_FALSE(p.grad().defined());
    out.push_back(p.detach().clone());
  }
  return out;
}

Tensor param_of(const Case& c) {
  Tensor p = Tensor::from_vector(c.p0, {kN}, DType::f32);
  p.requires_grad_();
  return p;
}

// The reference gradient sees the float32-rounded values the optimizer sees.
double f32(double v) { return double(float(v)); }

void expect_trajectory(const std::vector<Tensor>& got,
                       const std::vector<std::vector<double>>& ref) {
  for (size_t s = 0; s < got.size(); ++s)
    EXPECT_TRUE(all_close(got[s], Tensor::from_vector(ref[s], {kN}), 1e-5, 1e-6)) << "step " << s;
}

std::vector<std::vector<double>> sgd_reference(const Case& c, std::vector<double> lrs, double mom,
                                               double wd, bool nesterov) {
  std::vector<double> p(c.p0.size()), v(c.p0.size(), 0.0);
  for (size_t i = 0; i < p.size(); ++i) p[i] = f32(c.p0[i]);
  std::vector<std::vector<double>> out;
  for (int s = 0; s < kSteps; ++s) {
    for (size_t i = 0; i < p.size(); ++i) {
      double g = f32(c.grads[size_t(s)][i]) + wd * p[i];
      if (mom > 0) {
        v[i] = mom * v[i] + g;  // PyTorch: buf = g on the first step, the same with v = 0
        g = nesterov ? g + mom * v[i] : v[i];
      }
      p[i] -= lrs[size_t(s)] * g;
    }
    out.push_back(p);
  }
  return out;
}

std::vector<std::vector<double>> adam_reference(const Case& c, double lr, double b1, double b2,
                                                double eps, double wd, bool decoupled) {
  std::vector<double> p(c.p0.size()), m(p.size(), 0.0), v(p.size(), 0.0);
  for (size_t i = 0; i < p.size(); ++i) p[i] = f32(c.p0[i]);
  std::vector<std::vector<double>> out;
  for (int s = 0; s < kSteps; ++s) {
    double t = s + 1;
    for (size_t i = 0; i < p.size(); ++i) {
      double g = f32(c.grads[size_t(s)][i]);
      if (decoupled)
        p[i] *= 1 - lr * wd;
      else
        g += wd * p[i];
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      double mhat = m[i] / (1 - std::pow(b1, t)), vhat = v[i] / (1 - std::pow(b2, t));
      p[i] -= lr * mhat / (std::sqrt(vhat) + eps);
    }
    out.push_back(p);
  }
  return out;
}

}  // namespace

TEST(Optim, MomentumMatchesFormula) {
  Case c = make_case(1);
  Tensor p = param_of(c);
  auto opt = nn::Momentum({p}, 0.01, 0.9);
  EXPECT_EQ(opt->type_name(), "Momentum");
  expect_trajectory(run(c, p, *opt), sgd_reference(c, {0.01, 0.01, 0.01, 0.01}, 0.9, 0, false));
  EXPECT_EQ(opt->step_count(), kSteps);
}

TEST(Optim, MomentumNesterovWeightDecay) {
  Case c = make_case(2);
  Tensor p = param_of(c);
  auto opt = nn::Momentum({p}, 0.05, 0.8, 1e-2, /*use_nesterov=*/true);
  expect_trajectory(run(c, p, *opt), sgd_reference(c, {0.05, 0.05, 0.05, 0.05}, 0.8, 1e-2, true));
}

TEST(Optim, PlainSGDAndSchedule) {
  Case c = make_case(3);
  Tensor p = param_of(c);
  auto opt = nn::SGD({p}, 0.1, 0.0, 5e-4);
  EXPECT_EQ(opt->type_name(), "SGD");
  EXPECT_TRUE(opt->state_dict().size() == 1u);  // only "step": no velocity without momentum
  expect_trajectory(run(c, p, *opt), sgd_reference(c, {0.1, 0.1, 0.1, 0.1}, 0.0, 5e-4, false));

  Case d = make_case(4);
  Tensor q = param_of(d);
  auto sched = nn::Momentum({q}, nn::step_lr(0.1, 2, 0.5), 0.9);
  EXPECT_DOUBLE_EQ(sched->current_lr(), 0.1);
  expect_trajectory(run(d, q, *sched), sgd_reference(d, {0.1, 0.1, 0.05, 0.05}, 0.9, 0, false));
}

TEST(Optim, AdamMatchesFormula) {
  Case c = make_case(5);
  Tensor p = param_of(c);
  auto opt = nn::Adam({p}, 1e-3);
  expect_trajectory(run(c, p, *opt), adam_reference(c, 1e-3, 0.9, 0.999, 1e-8, 0, false));
}

TEST(Optim, AdamL2WeightDecay) {
  Case c = make_case(6);
  Tensor p = param_of(c);
  auto opt = nn::Adam({p}, 1e-2, 0.8, 0.99, 1e-6, 0.1);
  expect_trajectory(run(c, p, *opt), adam_reference(c, 1e-2, 0.8, 0.99, 1e-6, 0.1, false));
}

TEST(Optim, AdamWDecoupled) {
  Case c = make_case(7);
  Tensor p = param_of(c);
  auto opt = nn::AdamW({p}, 1e-2, 0.9, 0.999, 1e-8, 0.1);
  EXPECT_EQ(opt->type_name(), "AdamW");
  expect_trajectory(run(c, p, *opt), adam_reference(c, 1e-2, 0.9, 0.999, 1e-8, 0.1, true));
}

TEST(Optim, Float64ParametersAndSkippedGradients) {
  Tensor a = Tensor::from_vector(std::vector<double>{1.0, 2.0}, {2});
  Tensor b = Tensor::from_vector(std::vector<double>{3.0}, {1});
  a.requires_grad_();
  b.requires_grad_();
  auto opt = nn::Momentum({a, b}, 0.5, 0.9);
  a.set_grad(Tensor::from_vector(std::vector<double>{1.0, -1.0}, {2}));
  opt->step();  // b has no gradient: left alone
  EXPECT_EQ(a.to_double_vector(), (std::vector<double>{0.5, 2.5}));
  EXPECT_EQ(b.to_double_vector(), (std::vector<double>{3.0}));
}

TEST(Optim, TrainsAQuadratic) {
  // minimise ||p - 3||^2 through autograd.
  Tensor p = Tensor::zeros({5});
  p.requires_grad_();
  auto opt = nn::Adam({p}, 0.1);
  for (int i = 0; i < 300; ++i) {
    Tensor d = ops::sub(p, 3.0);
    ops::sum(ops::mul(d, d)).backward();
    opt->step();
    opt->zero_grad();
  }
  EXPECT_TRUE(all_close(p, Tensor::full({5}, 3.0), 0, 1e-2));
}

TEST(Optim, StateDictResumesExactly) {
  Case c = make_case(8);
  Tensor p1 = param_of(c), p2 = param_of(c);
  auto a = nn::Adam({p1}, 1e-2);
  auto b = nn::Adam({p2}, 1e-2);
  for (int s = 0; s < 2; ++s) {
    p1.set_grad(Tensor::from_vector(c.grads[size_t(s)], {kN}, DType::f32));
    a->step();
  }
  auto state = a->state_dict();
  EXPECT_TRUE(state.count("moment1.0") && state.count("moment2.0") && state.count("step"));
  EXPECT_EQ(state.at("step").item(), 2.0);
  {
    NoGradGuard g;
    p2.copy_(p1);
  }
  b->load_state_dict(state);
  EXPECT_EQ(b->step_count(), 2);
  for (int s = 2; s < kSteps; ++s) {
    p1.set_grad(Tensor::from_vector(c.grads[size_t(s)], {kN}, DType::f32));
    p2.set_grad(Tensor::from_vector(c.grads[size_t(s)], {kN}, DType::f32));
    a->step();
    b->step();
  }
  EXPECT_TRUE(all_close(p1, p2, 0, 0));
}

TEST(Optim, LoadStateDictListsProblems) {
  Tensor p = Tensor::zeros({3});
  p.requires_grad_();
  auto opt = nn::Momentum({p}, 0.1, 0.9);
  nn::StateDict bad;
  bad["moments.0"] = Tensor::zeros({4});
  bad["velocity.0"] = Tensor::zeros({3});
  try {
    opt->load_state_dict(bad);
    FAIL() << "did not throw";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("[load_state_dict] Momentum"), std::string::npos) << m;
    EXPECT_NE(m.find("step"), std::string::npos) << m;
    EXPECT_NE(m.find("velocity.0"), std::string::npos) << m;
    EXPECT_NE(m.find("moments.0: checkpoint [4], optimizer [3]"), std::string::npos) << m;
  }
}

TEST(Optim, ArgumentErrors) {
  Tensor p = Tensor::zeros({3});
  p.requires_grad_();
  EXPECT_TRUE(throws_with([&] { nn::Momentum({p}, 0.1, 0.0, 0.0, true); }, "Nesterov"));
  EXPECT_TRUE(throws_with([&] { nn::Adam({p}, 0.1, 1.0); }, "[Adam] betas"));
  EXPECT_TRUE(throws_with([&] { nn::Momentum({p, p}, 0.1, 0.9); }, "appears twice"));
  EXPECT_TRUE(throws_with([&] { nn::SGD({Tensor::arange(3)}, 0.1); }, "only floating"));
}

TEST(Optim, OptimizesAModel) {
  manual_seed(9);
  auto net = nn::SequentialCell({nn::Dense(4, 8), nn::Tanh(), nn::Dense(8, 1)});
  auto opt = nn::Momentum(net->trainable_params(), 0.05, 0.9);
  auto mse = nn::MSELoss();
  Tensor x = Tensor::uniform({32, 4}, -1, 1);
  Tensor y = ops::sum(x, {1}, true);
  double first = 0, last = 0;
  for (int i = 0; i < 100; ++i) {
    Tensor loss = mse->forward(net->forward(x), y);
    if (i == 0) first = loss.item();
    last = loss.item();
    loss.backward();
    opt->step();
    opt->zero_grad();
  }
  EXPECT_LT(last, first * 0.1);
}
