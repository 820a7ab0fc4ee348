#include <gtest/gtest.h>

#include <chrono>
#include <iostream>

#include "graph/capture.h"
#include "graph/passes/passes.h"
#include "graph/replay.h"
#include "zenith/zenith.h"

using namespace zenith;

struct Trainer {
  nn::CellPtr net;
  nn::LossPtr loss_fn;
  nn::OptimizerPtr opt;
  std::vector<std::pair<std::string, Tensor>> state;
  Trainer(const std::string& arch, int batch) {
    manual_seed(0);
    net = models::create(arch, 3, 32, 10);
    net->set_train(true);
    loss_fn = nn::SoftmaxCrossEntropyWithLogits(true);
    opt = nn::Momentum(net->trainable_params(), 0.01, 0.9);
    for (auto& p : net->named_parameters()) state.push_back(p);
    for (auto& p : net->named_buffers()) state.push_back(p);
    for (auto& [k, v] : opt->state_dict()) state.push_back({"optimizer." + k, v});
  }
  double step(graph::StepCompiler* c, const Tensor& x, const Tensor& y) {
    opt->zero_grad();
    if (!c) {
      Tensor loss = (*loss_fn)(net->forward(x), y);
      double l = loss.item();
      loss.backward();
      opt->step();
      return l;
    }
    auto run = c->begin({x, y});
    Tensor loss = run.phase([&] { return std::vector<Tensor>{(*loss_fn)(net->forward(x), y)}; })[0];
    double l = loss.item();
    run.phase([&] {
      loss.backward();
      return std::vector<Tensor>{};
    });
    run.phase([&] {
      opt->step();
      return std::vector<Tensor>{};
    });
    run.finish();
    return l;
  }
};

TEST(Scratch, Dump) {
  for (std::string arch : {"seedcnn", "resnet18"}) {
    int batch = arch == "seedcnn" ? 64 : 8;
    Trainer eager(arch, batch), graphm(arch, batch);
    graph::StepCompiler c(graphm.state, graphm.opt.get());
    manual_seed(1);
    std::vector<Tensor> xs, ys;
    for (int i = 0; i < 6; ++i) {
      xs.push_back(Tensor::randn({batch, 3, 32, 32}));
      ys.push_back(Tensor::randint(0, 10, {batch}));
    }
    double te = 0, tg = 0;
    for (int i = 0; i < 6; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      double le = eager.step(nullptr, xs[i], ys[i]);
      auto t1 = std::chrono::steady_clock::now();
      double lg = graphm.step(&c, xs[i], ys[i]);
      auto t2 = std::chrono::steady_clock::now();
      if (i >= 2) {
        te += std::chrono::duration<double>(t1 - t0).count();
        tg += std::chrono::duration<double>(t2 - t1).count();
      }
      std::cout << arch << " step " << i << " eager " << le << " graph " << lg << "\n";
    }
    std::cout << arch << " eager ms " << te / 4 * 1e3 << " graph ms " << tg / 4 * 1e3 << " arena "
              << c.arena_bytes() << "\n";
    auto pe = eager.net->named_parameters();
    auto pg = graphm.net->named_parameters();
    double maxdiff = 0;
    for (size_t k = 0; k < pe.size(); ++k) {
      auto a = pe[k].second.to_double_vector(), b = pg[k].second.to_double_vector();
      for (size_t j = 0; j < a.size(); ++j) maxdiff = std::max(maxdiff, std::abs(a[j] - b[j]));
    }
    std::cout << arch << " max param diff " << maxdiff << "\n";
  }
}

TEST(Scratch, Optimized) {
  for (std::string arch : {"seedcnn", "resnet18"}) {
    Trainer t(arch, 8);
    Tensor x = Tensor::randn({8, 3, 32, 32});
    Tensor y = Tensor::randint(0, 10, {8});
    t.opt->zero_grad();
    graph::Recorder rec({x, y}, t.state);
    rec.begin_phase();
    Tensor loss = (*t.loss_fn)(t.net->forward(x), y);
    rec.end_phase({loss});
    loss.item();
    rec.begin_phase();
    loss.backward();
    rec.end_phase({});
    rec.begin_phase();
    t.opt->step();
    rec.end_phase({});
    auto g = rec.finish();
    ASSERT_TRUE(g);
    graph::optimize(*g);
    std::cout << g->dump();
  }
}
