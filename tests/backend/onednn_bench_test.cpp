// Benchmarks of the oneDNN-backed kernels, disabled by default (not part of the suite):
//   build/<dir>/tests/backend_tests --gtest_also_run_disabled_tests --gtest_filter='*Bench*'
// Shapes: SeedCNN (batch 64, 1x28x28) and ResNet-18 basic blocks (batch 32, 32x32 CIFAR stem).
// The PyTorch side: tests/backend/onednn_bench_torch.py (same shapes, same clocks).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>

#include "backend/cpu/gemm.h"
#include "backend/cpu/onednn_layout.h"
#include "core/dispatch.h"
#include "support/op_check.h"
#include "zenith/models.h"
#include "zenith/optim.h"

using namespace zenith;

namespace {

// ZENITH_BENCH_CLOCK=cpu times process CPU time instead of wall time: on a shared, loaded
// machine a single-threaded run's CPU time is what the wall time would be on an idle one.
double now_ms() {
  static const bool cpu = [] {
    const char* e = std::getenv("ZENITH_BENCH_CLOCK");
    return e && std::string(e) == "cpu";
  }();
  if (!cpu)
    return std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
}

// Median (or minimum) milliseconds of `reps` runs of f after `warmup` runs.
template <typename F>
double median_ms(F&& f, int reps = 20, int warmup = 3) {
  for (int i = 0; i < warmup; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    double s = now_ms();
    f();
    t.push_back(now_ms() - s);
  }
  std::sort(t.begin(), t.end());
  // ZENITH_BENCH_STAT=min: the fastest run, a steadier estimate on a machine shared with others.
  static const bool use_min = [] {
    const char* e = std::getenv("ZENITH_BENCH_STAT");
    return e && std::string(e) == "min";
  }();
  return use_min ? t.front() : t[t.size() / 2];
}

// Time between consecutive dispatched ops, attributed to the later op (approximate profile).
struct OpProfile {
  std::map<std::string, std::pair<double, int>> by_op;
  double last = now_ms();
  static void observe(void* self, const dispatch::OpEvent& event) {
    if (event.decomposed) return;  // its ops were seen one by one
    auto* p = static_cast<OpProfile*>(self);
    double now = now_ms();
    auto& e = p->by_op[op_name(event.op)];
    e.first += now - p->last;
    e.second += 1;
    p->last = now;
  }
  void print(int steps) const {
    std::vector<std::pair<double, std::string>> rows;
    for (auto& [op, e] : by_op) rows.push_back({e.first / steps, op});
    std::sort(rows.rbegin(), rows.rend());
    for (auto& [ms, op] : rows)
      std::printf("    %-28s %7.3f ms/step  (%d calls/step)\n", op.c_str(), ms,
                  by_op.at(op).second / steps);
  }
};

// One training step of `net` on (x, labels): forward, cross entropy, backward, Momentum step.
void train_step(nn::CellPtr& net, nn::LossPtr& loss, nn::OptimizerPtr& opt, const Tensor& x,
                const Tensor& labels) {
  opt->zero_grad();
  Tensor l = (*loss)((*net)(x), labels);
  l.backward();
  opt->step();
}

void bench_model(const char* name, nn::CellPtr net, const Tensor& x, int reps) {
  Tensor labels = Tensor::randint(0, 10, {x.size(0)});
  auto loss = nn::SoftmaxCrossEntropyWithLogits(true);
  auto opt = nn::Momentum(net->trainable_params(), 0.01, 0.9);
  for (bool keep : {true, false}) {
    cpu::set_keep_layout(keep);
    double ms = median_ms([&] { train_step(net, loss, opt, x, labels); }, reps);
    cpu::reset_onednn_stats();
    rusage before, after;
    getrusage(RUSAGE_SELF, &before);
    train_step(net, loss, opt, x, labels);
    getrusage(RUSAGE_SELF, &after);
    cpu::OnednnStats s = cpu::onednn_stats();
    std::printf(
        "%s train step, layouts %s: %.2f ms (%.0f img/s); %lld reorders/step (%.2f ms), "
        "cache %lld hits %lld misses, %ld page faults/step\n",
        name, keep ? "kept" : "plain", ms, double(x.size(0)) / ms * 1e3, (long long)s.reorders,
        s.reorder_ms, (long long)s.cache_hits, (long long)s.cache_misses,
        after.ru_minflt - before.ru_minflt);
  }
  cpu::set_keep_layout(true);
  OpProfile prof;
  int id = dispatch::add_observer(&OpProfile::observe, &prof);
  const int steps = 5;
  for (int i = 0; i < steps; ++i) {
    prof.last = now_ms();
    train_step(net, loss, opt, x, labels);
  }
  dispatch::remove_observer(id);
  std::printf("  per-op profile (layouts kept):\n");
  prof.print(steps);
}

}  // namespace

TEST(OnednnBench, DISABLED_Sgemm) {
  struct Shape3 {
    const char* what;
    bool ta, tb;
    int64_t m, n, k;
  };
  std::vector<Shape3> shapes = {
      {"seedcnn dense fwd  x[64,1600] W^T", false, true, 64, 10, 1600},
      {"seedcnn dense dX   dy[64,10] W", false, false, 64, 1600, 10},
      {"seedcnn dense dW   dy^T x", true, false, 10, 1600, 64},
      {"resnet fc fwd      x[32,512] W^T", false, true, 32, 10, 512},
      {"resnet fc dW       dy^T x", true, false, 10, 512, 32},
      {"mlp 256x1024x1024", false, true, 256, 1024, 1024},
  };
  for (auto& s : shapes) {
    std::vector<float> a(size_t(s.m * s.k), 0.5f), b(size_t(s.k * s.n), 0.25f),
        c(size_t(s.m * s.n));
    int64_t lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
    double t[2];
    for (int i = 0; i < 2; ++i) {
      cpu::set_sgemm_backend(i == 0 ? "onednn" : "openblas");
      t[i] = median_ms(
          [&] {
            cpu::gemm(s.ta, s.tb, s.m, s.n, s.k, 1.f, a.data(), lda, b.data(), ldb, 0.f, c.data(),
                      s.n);
          },
          50, 5);
    }
    std::printf("sgemm %-36s onednn %8.4f ms  openblas %8.4f ms\n", s.what, t[0], t[1]);
  }
  cpu::set_sgemm_backend("onednn");
}

TEST(OnednnBench, DISABLED_SeedCnnLayers) {
  // conv 1->32 3x3 on 28x28, relu, maxpool 2, conv 32->64 3x3, relu, maxpool 2, dense 1600->10.
  Tensor x = Tensor::randn({64, 1, 28, 28});
  Tensor w1 = (Tensor::randn({32, 1, 3, 3}) * 0.3).detach().requires_grad_();
  Tensor b1 = Tensor::zeros({32}).requires_grad_();
  Tensor w2 = (Tensor::randn({64, 32, 3, 3}) * 0.06).detach().requires_grad_();
  Tensor b2 = Tensor::zeros({64}).requires_grad_();
  Tensor w3 = (Tensor::randn({10, 1600}) * 0.02).detach().requires_grad_();
  Tensor b3 = Tensor::zeros({10}).requires_grad_();
  Tensor x2 = Tensor::randn({64, 32, 13, 13}).requires_grad_();
  auto conv1 = [&] { return ops::conv2d(x, w1, b1); };
  auto conv2 = [&] { return ops::conv2d(x2, w2, b2); };
  auto fb = [](auto f) {
    return [f] {
      Tensor y = f();
      y.backward(Tensor::ones(y.shape()));
    };
  };
  {
    NoGradGuard ng;
    std::printf("conv1 1->32 28x28 b64: fwd %.3f ms\n", median_ms(conv1));
    std::printf("conv2 32->64 13x13 b64: fwd %.3f ms\n", median_ms(conv2));
  }
  std::printf("conv1 fwd+bwd(weights) %.3f ms\n", median_ms(fb(conv1)));
  // The first conv's weight gradient with dy in oneDNN's blocked format, as the layer above hands
  // it back in training: fmnist's 1 channel and CIFAR's 3.
  for (int64_t c : {1, 3}) {
    const int64_t hw = c == 1 ? 28 : 32;
    Tensor xc = Tensor::randn({64, c, hw, hw});
    Tensor wc = (Tensor::randn({32, c, 3, 3}) * 0.3).detach().requires_grad_();
    Tensor dy;
    {
      NoGradGuard ng;
      dy = ops::conv2d(xc, wc.detach());
    }
    std::printf("conv1 %lld->32 %lldx%lld b64 fwd+bwd(weights), dy %s: %.3f ms\n", (long long)c,
                (long long)hw, (long long)hw, dy.has_layout() ? "blocked" : "plain",
                median_ms([&] { ops::conv2d(xc, wc).backward(dy); }));
  }
  // The first max pooling on the blocked conv output, forward and backward: fmnist's and CIFAR's.
  for (int64_t hw : {26, 30}) {
    Tensor h;
    {
      NoGradGuard ng;
      h = ops::conv2d(Tensor::randn({64, 1, hw + 2, hw + 2}), w1.detach());
    }
    h.requires_grad_();
    Tensor dy = ops::max_pool2d(h.detach(), {2}) * 0.5;
    std::printf("pool1 2x2 64x32x%lldx%lld (%s) fwd+bwd %.3f ms\n", (long long)hw, (long long)hw,
                h.has_layout() ? "blocked" : "plain",
                median_ms([&] { ops::max_pool2d(h, {2}).backward(dy); }));
  }
  std::printf("conv2 fwd+bwd(data+weights) %.3f ms\n", median_ms(fb(conv2)));
  auto net = [&] {
    Tensor h = ops::max_pool2d(ops::relu(ops::conv2d(x, w1, b1)), {2});
    h = ops::max_pool2d(ops::relu(ops::conv2d(h, w2, b2)), {2});
    return ops::linear(h.flatten(1), w3, b3);
  };
  for (bool keep : {true, false}) {
    cpu::set_keep_layout(keep);
    double ms = median_ms(fb(net));
    cpu::reset_onednn_stats();
    fb(net)();
    std::printf("seedcnn layers fwd+bwd, layouts %s: %.3f ms, %lld reorders (%.3f ms)\n",
                keep ? "kept" : "plain", ms, (long long)cpu::onednn_stats().reorders,
                cpu::onednn_stats().reorder_ms);
  }
  cpu::set_keep_layout(true);
}

TEST(OnednnBench, DISABLED_ResNetBlockLayers) {
  for (auto [C, H] :
       std::vector<std::pair<int64_t, int64_t>>{{64, 32}, {128, 16}, {256, 8}, {512, 4}}) {
    Tensor x = Tensor::randn({32, C, H, H}).requires_grad_();
    Tensor w = (Tensor::randn({C, C, 3, 3}) * 0.05).detach().requires_grad_();
    Tensor g = Tensor::ones({C}).requires_grad_(), b = Tensor::zeros({C}).requires_grad_();
    Tensor rm = Tensor::zeros({C}), rv = Tensor::ones({C});
    ops::Conv2dOptions o;
    o.padding = {1, 1};
    double fwd;
    {
      NoGradGuard ng;
      fwd = median_ms([&] { ops::conv2d(x, w, Tensor(), o); }, 10);
    }
    double block = median_ms(
        [&] {
          Tensor y = ops::relu(ops::batch_norm(ops::conv2d(x, w, Tensor(), o), g, b, rm, rv, true));
          y.backward(Tensor::ones(y.shape()));
        },
        10);
    // Batch norm alone on a plain input: oneDNN vs the channel loops.
    Tensor xp = Tensor::randn({32, C, H, H}), dy = Tensor::randn({32, C, H, H});
    double bn[2];
    for (int i = 0; i < 2; ++i) {
      BatchNormAttrs a{.training = true, .momentum = 0.1, .eps = 1e-5};
      a.impl = i == 0 ? BatchNormImpl::kOnednn : BatchNormImpl::kLoops;
      bn[i] = median_ms(
          [&] {
            auto o = dispatch::call<OpId::batch_norm>({xp, g.detach(), b.detach(), rm, rv}, a);
            dispatch::call<OpId::batch_norm_backward>({dy, xp, g.detach(), o[1], o[2]}, a);
          },
          10);
    }
    // ... and on the blocked conv output, as in the network.
    Tensor xb, dyb;
    {
      NoGradGuard ng;
      xb = ops::conv2d(xp, w.detach(), Tensor(), o);
      dyb = ops::conv2d(dy, w.detach(), Tensor(), o);
    }
    double bn_blocked[2];
    for (int i = 0; i < 2; ++i) {
      BatchNormAttrs a{.training = true, .momentum = 0.1, .eps = 1e-5};
      a.impl = i == 0 ? BatchNormImpl::kOnednn : BatchNormImpl::kLoops;
      bn_blocked[i] = median_ms(
          [&] {
            auto o = dispatch::call<OpId::batch_norm>({xb, g.detach(), b.detach(), rm, rv}, a);
            dispatch::call<OpId::batch_norm_backward>({dyb, xb, g.detach(), o[1], o[2]}, a);
          },
          10);
    }
    std::printf(
        "resnet C=%lld H=%lld b32: conv fwd %.2f ms; conv+bn+relu fwd+bwd %.2f ms; "
        "bn fwd+bwd: plain onednn %.2f ms, plain loops %.2f ms, blocked%s onednn %.2f ms, "
        "blocked loops %.2f ms\n",
        (long long)C, (long long)H, fwd, block, bn[0], bn[1], xb.has_layout() ? "" : "(not!)",
        bn_blocked[0], bn_blocked[1]);
  }
}

TEST(OnednnBench, DISABLED_SeedCnnTrainStep) {
  manual_seed(0);
  bench_model("seedcnn 1x28x28 b64", models::seed_cnn(1, 28, 10), Tensor::randn({64, 1, 28, 28}),
              20);
  bench_model("seedcnn 3x32x32 b64", models::seed_cnn(3, 32, 10), Tensor::randn({64, 3, 32, 32}),
              20);
}

TEST(OnednnBench, DISABLED_ResNet18TrainStep) {
  manual_seed(0);
  bench_model("resnet18 3x32x32 b32", models::resnet18(3, 10), Tensor::randn({32, 3, 32, 32}), 5);
}
