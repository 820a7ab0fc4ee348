// Data-parallel scaling on one host: images/s of a training step with 1 rank x T threads
// against R ranks x T/R threads under DistributedDataParallel (same global batch), and the
// fraction of step time each rank spends blocked on gradient all-reduces at the end of backward.
// Every configuration runs in forked processes (ranks on 127.0.0.1, file store), alternating
// configurations for --repeats rounds; figures are medians over steps, then over rounds, because
// shared cores stretch some steps. The load average is printed before and after.
//
//   ddp_scaling [--models seedcnn,resnet18] [--threads 2] [--ranks 2] [--batch 128]
//               [--resnet-batch 64] [--steps 8] [--warmup 2] [--repeats 3] [--bucket-mb 25]
//               [--pin 1] [--json FILE]
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "bench_ranks.h"
#include "zenith/zenith.h"

namespace comm = zenith::communication;
using Clock = std::chrono::steady_clock;
using namespace zenith;

namespace {

struct Args {
  std::vector<std::string> models{"seedcnn", "resnet18"};
  int threads = 2;
  int ranks = 2;
  int64_t batch = 128;        // global batch, SeedCNN (64 per rank with 2 ranks)
  int64_t resnet_batch = 64;  // global batch, ResNet-18 (32 per rank with 2 ranks)
  int steps = 8;
  int warmup = 2;
  int repeats = 3;
  double bucket_mb = 25;
  int pin = 1;
  std::string json;
};

std::vector<std::string> split(const std::string& v) {
  std::vector<std::string> out;
  std::stringstream ss(v);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
  return out;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--models")
      a.models = split(v);
    else if (k == "--threads")
      a.threads = std::stoi(v);
    else if (k == "--ranks")
      a.ranks = std::stoi(v);
    else if (k == "--batch")
      a.batch = std::stoll(v);
    else if (k == "--resnet-batch")
      a.resnet_batch = std::stoll(v);
    else if (k == "--steps")
      a.steps = std::stoi(v);
    else if (k == "--warmup")
      a.warmup = std::stoi(v);
    else if (k == "--repeats")
      a.repeats = std::stoi(v);
    else if (k == "--bucket-mb")
      a.bucket_mb = std::stod(v);
    else if (k == "--pin")
      a.pin = std::stoi(v);
    else if (k == "--json")
      a.json = v;
    else {
      std::fprintf(stderr, "[ddp_scaling] unknown option %s\n", k.c_str());
      std::exit(2);
    }
  }
  if (a.ranks < 1 || a.threads < 1 || a.steps < 1 || a.repeats < 1) {
    std::fprintf(stderr, "[ddp_scaling] ranks, threads, steps and repeats must be positive\n");
    std::exit(2);
  }
  return a;
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct RankTimes {
  std::vector<double> step, wait;  // seconds per measured step
};

// One rank (or the single process when world == 1): `steps` timed training steps.
RankTimes run_rank(const Args& a, const std::string& model, int64_t global_batch, int rank,
                   int world, int threads, const std::string& store) {
  if (a.pin && world > 1) {  // one core per rank, as the platform's local executor does
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(rank % std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)), &set);
    sched_setaffinity(0, sizeof set, &set);
  }
  context::set_num_threads(threads);
  manual_seed(1);
  nn::CellPtr net = models::create(model, 3, 32, 10);
  std::shared_ptr<nn::DistributedDataParallelImpl> ddp;
  if (world > 1) {
    comm::Options o;
    o.rank = rank;
    o.size = world;
    o.store = store;
    o.prefix = "ddp_scaling";
    o.address = "127.0.0.1";
    o.timeout = std::chrono::seconds(300);
    comm::init(o);
    ddp = nn::DistributedDataParallel(net, {.bucket_cap_mb = a.bucket_mb});
    net = ddp;
  }
  const int64_t b = global_batch / world;
  Tensor x = Tensor::randn({b, 3, 32, 32});
  std::vector<int64_t> labels(static_cast<size_t>(b));
  for (int64_t i = 0; i < b; ++i) labels[size_t(i)] = (i + rank) % 10;
  Tensor y = Tensor::from_vector(labels, {b});
  auto opt = nn::Momentum(net->trainable_params(), 0.01, 0.9);
  auto loss_fn = nn::SoftmaxCrossEntropyWithLogits(true);
  net->set_train(true);
  RankTimes t;
  for (int s = 0; s < a.warmup + a.steps; ++s) {
    double wait0 = ddp ? ddp->stats().wait_seconds : 0.0;
    auto t0 = Clock::now();
    opt->zero_grad();
    Tensor loss = (*loss_fn)(net->forward(x), y);
    loss.backward();
    opt->step();
    (void)loss.item();
    double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    if (s < a.warmup) continue;
    t.step.push_back(dt);
    t.wait.push_back(ddp ? ddp->stats().wait_seconds - wait0 : 0.0);
  }
  if (world > 1) comm::release();
  return t;
}

struct Result {
  double images_per_second = 0;  // global batch / median step time (slowest rank)
  double step_seconds = 0;
  double wait_fraction = 0;  // median over ranks of sum(wait) / sum(step)
};

// Forks `world` ranks (bench::fork_ranks) and gathers their step and wait times.
Result run_config(const Args& a, const std::string& model, int64_t global_batch, int world,
                  int threads) {
  char tmpl[] = "/tmp/zenith_ddp_scaling_XXXXXX";
  if (!mkdtemp(tmpl)) {
    std::perror("mkdtemp");
    std::exit(1);
  }
  std::string dir = tmpl;
  std::vector<nlohmann::json> ranks;
  try {
    ranks = bench::fork_ranks(
        world, dir, "ddp_scaling",
        [&](int r) {
          RankTimes t = run_rank(a, model, global_batch, r, world, threads, "file://" + dir);
          return nlohmann::json{{"step", t.step}, {"wait", t.wait}};
        },
        /*join=*/false);  // run_rank pins the rank to its core before it joins
  } catch (const std::exception&) {
    std::fprintf(stderr, "[ddp_scaling] %s with %d rank(s) failed\n", model.c_str(), world);
    std::exit(1);
  }
  Result res;
  std::vector<double> fractions;
  for (const auto& rank : ranks) {
    const auto step = rank["step"].get<std::vector<double>>();
    const auto wait = rank["wait"].get<std::vector<double>>();
    double sum_s = 0, sum_w = 0;
    for (size_t i = 0; i < step.size(); ++i) sum_s += step[i], sum_w += wait[i];
    res.step_seconds = std::max(res.step_seconds, median(step));
    fractions.push_back(sum_s > 0 ? sum_w / sum_s : 0);
  }
  std::filesystem::remove_all(dir);
  res.images_per_second = double(global_batch) / res.step_seconds;
  res.wait_fraction = median(fractions);
  return res;
}

}  // namespace

int main(int argc, char** argv) {
  Args a = parse(argc, argv);
  const int per_rank_threads = std::max(1, a.threads / a.ranks);
  std::string load_before = load_average();
  std::printf(
      "# zenith DDP scaling: 1 rank x %d threads vs %d ranks x %d thread(s), same global "
      "batch, synthetic 3x32x32 input, Momentum SGD; %d timed steps after %d warm-up, "
      "%d alternating rounds, medians; buckets %.0f MiB\n",
      a.threads, a.ranks, per_rank_threads, a.steps, a.warmup, a.repeats, a.bucket_mb);
  std::printf("# load average before: %s (%ld cores online)\n", load_before.c_str(),
              sysconf(_SC_NPROCESSORS_ONLN));
  std::printf("%-10s %6s %-16s %10s %10s %10s %14s\n", "model", "batch", "config", "step_ms",
              "img/s", "ratio", "comm_wait_%");
  nlohmann::json out = nlohmann::json::array();
  for (const auto& model : a.models) {
    const int64_t batch = model == "resnet18" ? a.resnet_batch : a.batch;
    std::vector<double> single_ips, multi_ips, single_step, multi_step, waits;
    for (int rep = 0; rep < a.repeats; ++rep) {
      Result s = run_config(a, model, batch, 1, a.threads);
      Result m = run_config(a, model, batch, a.ranks, per_rank_threads);
      single_ips.push_back(s.images_per_second);
      single_step.push_back(s.step_seconds);
      multi_ips.push_back(m.images_per_second);
      multi_step.push_back(m.step_seconds);
      waits.push_back(m.wait_fraction);
    }
    double s_ips = median(single_ips), m_ips = median(multi_ips);
    char one[32], many[32];
    std::snprintf(one, sizeof one, "1x%d", a.threads);
    std::snprintf(many, sizeof many, "%dx%d", a.ranks, per_rank_threads);
    std::printf("%-10s %6lld %-16s %10.1f %10.1f %10s %14s\n", model.c_str(), (long long)batch, one,
                1e3 * median(single_step), s_ips, "1.00", "-");
    std::printf("%-10s %6lld %-16s %10.1f %10.1f %10.2f %14.1f\n", model.c_str(), (long long)batch,
                many, 1e3 * median(multi_step), m_ips, m_ips / s_ips, 100 * median(waits));
    std::fflush(stdout);
    out.push_back({{"model", model},
                   {"global_batch", batch},
                   {"single",
                    {{"ranks", 1},
                     {"threads", a.threads},
                     {"images_per_second", s_ips},
                     {"step_seconds", median(single_step)},
                     {"rounds", single_ips}}},
                   {"ddp",
                    {{"ranks", a.ranks},
                     {"threads", per_rank_threads},
                     {"images_per_second", m_ips},
                     {"step_seconds", median(multi_step)},
                     {"comm_wait_fraction", median(waits)},
                     {"rounds", multi_ips}}},
                   {"ratio", m_ips / s_ips}});
  }
  std::string load_after = load_average();
  std::printf("# load average after: %s\n", load_after.c_str());
  if (!a.json.empty()) {
    std::ofstream f(a.json);
    f << nlohmann::json{{"load_before", load_before}, {"load_after", load_after}, {"results", out}}
             .dump(2)
      << "\n";
  }
  return 0;
}
